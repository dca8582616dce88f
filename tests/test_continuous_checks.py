"""The continuous dynamics' inputs and checks: kinematic variables (their accelerations are
inputs), states off the constraint manifold, and inputs too large for the model."""
import numpy as np
import pytest

import core

from randsys import fd

# a double pendulum whose tip hangs by a string from a hand moved along x: the hand position
# `c` and the string length `len` are prescribed (kinematic), theta1, theta2 are dynamic
PUPPET = {
    "gravity": [0, -9.8, 0],
    "frames": [
        {"name": "l1", "parent": "world", "rz": "theta1"},
        {"name": "m1", "parent": "l1", "ty": -1.0, "mass": 1.0},
        {"name": "l2", "parent": "m1", "rz": "theta2"},
        {"name": "m2", "parent": "l2", "ty": -1.0, "mass": 0.5, "inertia": [0.01, 0.02, 0.03]},
        {"name": "hand_x", "parent": "world", "offset": {"translation": [0.5, 1.0, 0.0]}, "tx": "c"},
    ],
    "constraints": [{"type": "distance", "frame1": "hand_x", "frame2": "m2", "distance": "len"}],
    "damping": [{"config": "theta2", "coefficient": 0.3}],
    "inputs": [{"type": "torque", "config": "theta1", "name": "tau"}],
    "kinematic": ["c", "len"],
}


def puppet_state(s, rng):
    """A state on the constraint: len fitted to (theta1, theta2, c), dq tangent to it."""
    names = s.config_names
    q = np.zeros(s.nq)
    q[names.index("theta1")], q[names.index("theta2")], q[names.index("c")] = 0.4, -0.3, 0.2
    q[names.index("len")] = 2.0
    for _ in range(30):
        h, Dh = s.constraint(q, 1)
        q[names.index("len")] -= h[0] / Dh[0, names.index("len")]
    Dh = s.constraint(q, 1)[1]
    dq = rng.normal(size=s.nq)
    dq -= Dh[0] * (Dh[0] @ dq) / (Dh[0] @ Dh[0])
    return q, dq


def test_kinematic_accelerations_are_inputs_and_exact():
    s = core.load_system(PUPPET)
    rng = np.random.default_rng(3)
    names, n = s.config_names, s.nq
    kin = [names.index(k) for k in ("c", "len")]
    assert s.continuous_input_names == ["tau", "c_ddot", "len_ddot"]
    q, dq = puppet_state(s, rng)
    u = np.array([0.7, 1.5, -0.4])
    ddq = s.qdd(q, dq, u)
    np.testing.assert_array_equal(ddq[kin], u[1:])          # prescribed rows: the inputs
    # the constraint holds at acceleration level: d2/dt2 h(q(t)) = Dh ddq + dq' D2h dq = 0
    _, Dh, D2h = s.constraint(q, 2)
    assert abs(Dh[0] @ ddq + dq @ D2h[0] @ dq) < 1e-10
    # the prescribed motion drives the dynamic variables
    assert np.abs(s.qdd(q, dq, u) - s.qdd(q, dq, [0.7, 0.0, 0.0])).max() > 0.1
    A, B = s.linearize(q, dq, u)
    assert A.shape == (2 * n, 2 * n) and B.shape == (2 * n, 3)

    def f(x, uu):
        return np.concatenate([x[n:], s.qdd(x[:n], x[n:], uu)])
    x = np.concatenate([q, dq])
    np.testing.assert_allclose(A, fd(lambda xx: f(xx, u), x), atol=1e-7)
    np.testing.assert_allclose(B, fd(lambda uu: f(x, uu), u), atol=1e-7)
    for j, k in enumerate(kin):                  # d ddq_kin / d u_kin = I, nothing else
        assert B[n + k, 1 + j] == 1.0 and np.count_nonzero(A[n + k]) == 0
    # off the manifold too (the identities hold for lam eliminated as a function of the state)
    x_off = x + 0.05 * rng.normal(size=2 * n)
    A_off, B_off = s.linearize(x_off[:n], x_off[n:], u, residual_limit=None)
    np.testing.assert_allclose(A_off, fd(lambda xx: f(xx, u), x_off), atol=1e-7)
    np.testing.assert_allclose(B_off, fd(lambda uu: f(x_off, uu), u), atol=1e-7)
    with pytest.raises(ValueError, match=r"u must be a vector of 3 entries \(tau, c_ddot, len_ddot\)"):
        s.qdd(q, dq, [0.7])


def test_kinematic_variables_agree_with_the_integrator():
    """A step of the variational integrator with the kinematic variables moved along
    q_K(t) = q_K + dq_K t + a t^2/2 approaches the continuous flow as dt falls."""
    s = core.load_system(PUPPET)
    q, dq = puppet_state(s, np.random.default_rng(5))
    a = np.array([1.5, -0.4])
    u = np.concatenate([[0.7], a])
    names = s.config_names
    kin = np.array([names.index("c"), names.index("len")])
    errors = []
    for dt in (2e-3, 1e-3):
        vi = core.MidpointVI(s, dt)
        x0 = vi.discrete_state(q, dq)
        steps = int(round(0.02 / dt))
        x = x0
        for k in range(steps):
            t1 = (k + 1) * dt
            x = vi.step(x, np.concatenate([[0.7], q[kin] + dq[kin] * t1 + 0.5 * a * t1 ** 2]))
        qd = vi.continuous_state(x)[0]
        # the continuous reference: fine RK4 on ddq = qdd(q, dq, u)
        y, h = np.concatenate([q, dq]), 1e-4
        f = lambda y: np.concatenate([y[s.nq:], s.qdd(y[:s.nq], y[s.nq:], u)])  # noqa: E731
        for _ in range(int(round(0.02 / h))):
            k1 = f(y)
            k2 = f(y + h / 2 * k1)
            k3 = f(y + h / 2 * k2)
            k4 = f(y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        errors.append(np.abs(qd - y[:s.nq]).max())
    assert errors[1] < 1e-5 and errors[1] < 0.6 * errors[0]     # (the response to a is ~3e-4)


def test_off_manifold_states_are_refused_by_both_linearizations(double_pendulum):
    s = double_pendulum
    q_bad, dq = np.array([0.5246, 1.0472 + 0.1]), np.array([1.0, -2.0])
    u = [2.0]
    assert abs(s.constraint(q_bad)[0]) > 0.05
    for call in (lambda **kw: s.linearize(q_bad, dq, u, **kw),
                 lambda **kw: s.linearize_minimal(q_bad, dq, u, **kw)):
        with pytest.raises(ValueError, match=r"the state violates holonomic constraint row 0: "
                           r"h = -?0\.\d+ .*needs a state on the constraint manifold"):
            call()
        with pytest.raises(ValueError, match="residual_limit must be a finite positive number"):
            call(residual_limit=-1.0)
    A, B = s.linearize(q_bad, dq, u, residual_limit=None)      # None skips the check
    assert np.all(np.isfinite(A))
    # velocity level: on the constraint, dq not tangent to it
    q = np.array([0.5246, 1.0472])
    for _ in range(30):
        h, Dh = s.constraint(q, 1)
        q[1] -= h[0] / Dh[0, 1]
    Dh = s.constraint(q, 1)[1]
    tangent = np.array([1.0, -Dh[0, 0] / Dh[0, 1]])
    s.linearize(q, tangent, u)
    s.linearize_minimal(q, tangent, u)
    for call in (lambda: s.linearize(q, tangent + [0.0, 0.1], u),
                 lambda: s.linearize_minimal(q, tangent + [0.0, 0.1], u)):
        with pytest.raises(ValueError, match=r"dq violates holonomic constraint row 0 at velocity "
                           r"level: residual .*needs a state on the constraint manifold"):
            call()
    # a loose tolerance accepts what a strict one refuses (one argument for both)
    s.linearize(q, tangent + [0.0, 1e-4], u, residual_limit=1e-3)
    s.linearize_minimal(q, tangent + [0.0, 1e-4], u, residual_limit=1e-3)
    # a configuration alone (what the integrator's linearization takes): the same check
    with pytest.raises(ValueError, match=r"holonomic constraint row 0: h = .*the discrete step needs a state"):
        s.check_configuration(q_bad, what="the discrete step")
    s.check_configuration(q)
    s.check_configuration(q_bad, residual_limit=1.0)


def test_overflow_is_not_reported_as_a_singular_matrix():
    # q = 1e300 used to report "the mass matrix is singular"
    s = core.load_system({"gravity": [0, -9.81, 0], "frames": [
        {"name": "cart", "parent": "world", "tx": "x", "mass": 1.0},
        {"name": "pole", "parent": "cart", "rz": "theta"},
        {"name": "tip", "parent": "pole", "ty": 0.5, "mass": 0.2}],
        "inputs": [{"type": "torque", "config": "x", "name": "cart_force"}]})
    for call in (lambda: s.qdd([1e300, 0.0], [0.0, 0.0], [0.0]),
                 lambda: s.linearize([1e300, 0.0], [0.0, 0.0], [0.0]),
                 lambda: s.qdd([0.0, 0.0], [0.0, 1e160], [0.0])):
        with pytest.raises(core.errors.NonFiniteError, match=r"overflowed: finite inputs gave non-finite "
                           r"intermediates \(largest input entry (q\[0\] \(x\) = 1e\+300|"
                           r"dq\[1\] \(theta\) = 1e\+160)\)"):
            call()
