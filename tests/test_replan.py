"""Re-planning from the measured state (mechnode.logic.replan, ROS-free) and the closed-loop prediction
it runs on (core.MidpointVI.closed_loop): the prediction is the step-by-step closed loop, its
linearization the integrator's, the gains the library's TV-LQR along it, and the schedule swaps
in without a jump."""
import numpy as np
import pytest

import core
from mechnode.logic.gains import gain_schedule, schedule_in_qdot
from mechnode.logic.plant import Plant
from mechnode.logic.replan import replan, window
from mechnode.logic.weights import Weights

DT = 0.01


@pytest.fixture(scope="module")
def cartpole():
    return Plant.load("cartpole.yaml", DT)


def _schedule(plant, N=60, seed=0):
    """A gain schedule along a feasible reference (a rollout of smooth inputs)."""
    rng = np.random.default_rng(seed)
    t = DT * np.arange(N)
    U = 0.5 * np.sin(3 * t + rng.uniform(0, 3, size=(1, plant.nu)).T).T
    X = core.simulate_open_loop(plant.vi.step, plant.vi.rest_state(np.zeros(plant.n)), U)
    w = Weights.from_values(plant, [10, 10, 1, 10], [0.1])
    return gain_schedule(plant, X, U, w, ["cart_joint", "pole_joint"]), w


def test_closed_loop_is_the_step_by_step_loop(cartpole):
    vi = cartpole.vi
    s, _ = _schedule(cartpole)
    N = 30
    x0 = s.x_ref[0] + np.array([0.05, -0.1, 0.2, 0.0])
    X, U, A, B = vi.closed_loop(x0, s.x_ref[:N], s.u_ref[:N], s.K[:N])
    x = x0
    for k in range(N):
        np.testing.assert_allclose(U[k], s.u_ref[k] - s.K[k] @ (x - s.x_ref[k]), rtol=1e-14, atol=1e-14)
        x1, Ak, Bk = vi.step_linearize(x, U[k])     # (the law's sum in the kernel's order)
        np.testing.assert_array_equal(X[k], x)
        np.testing.assert_array_equal(A[k], Ak)
        np.testing.assert_array_equal(B[k], Bk)
        x = x1
    np.testing.assert_array_equal(X[N], x)
    # X_ref may carry the window's end row too
    assert np.array_equal(vi.closed_loop(x0, s.x_ref[:N + 1], s.u_ref[:N], s.K[:N])[0], X)


def test_closed_loop_names_what_is_wrong_and_the_failing_step(cartpole):
    vi = cartpole.vi
    s, _ = _schedule(cartpole)
    x0 = s.x_ref[0]
    with pytest.raises(ValueError, match=r"K must have shape \(5, 1, 4\)"):
        vi.closed_loop(x0, s.x_ref[:5], s.u_ref[:5], s.K[:4])
    with pytest.raises(ValueError, match="X_ref must have N = 5 or N \\+ 1 rows"):
        vi.closed_loop(x0, s.x_ref[:3], s.u_ref[:5], s.K[:5])
    with pytest.raises(ValueError, match="x0"):
        vi.closed_loop(np.full(4, np.nan), s.x_ref[:5], s.u_ref[:5], s.K[:5])
    K = np.array(s.K[:5])
    K[3] = 1e300                                   # the law blows up at step 3
    with pytest.raises(core.CoreError, match="step 3 of the closed loop"):
        vi.closed_loop(x0 + 0.1, s.x_ref[:5], s.u_ref[:5], K)


def test_replan_follows_the_prediction_with_the_gains_along_it(cartpole):
    s, w = _schedule(cartpole)
    N = s.knots - 1
    t = 0.203                                       # nearest knot 20
    x = s.x_ref[20] + np.array([0.1, -0.2, 0.3, -0.4])
    for horizon, steps in ((None, N - 20), (0.25, 25)):
        assert window(s, t, horizon) == (20, steps)
        r = replan(cartpole, s, x, t, w, horizon)
        rows = slice(20, 20 + steps)
        X, U, A, B = cartpole.vi.closed_loop(x, s.x_ref[rows], s.u_ref[rows], s.K[rows])
        _, P = core.dlqr(A[-1], B[-1], w.Q, w.R)
        K, _ = core.tvlqr(A, B, w.Q, w.R, P)
        np.testing.assert_array_equal(r.x_ref[rows], X[:steps])
        np.testing.assert_array_equal(r.u_ref[rows], U)
        np.testing.assert_allclose(r.K[rows], K, rtol=1e-12, atol=1e-12)
        # the rest is the old schedule's: before the window, after it, and the hold row
        for name in ("x_ref", "u_ref", "K"):
            new, old = getattr(r, name), getattr(s, name)
            np.testing.assert_array_equal(new[:20], old[:20])
            np.testing.assert_array_equal(new[20 + steps:], old[20 + steps:])
        np.testing.assert_array_equal(r.times, s.times)
        assert r.info["replan_knot"] == 20 and r.info["replan_steps"] == steps
        assert r.info["closed_loop_s"] > 0 and r.info["riccati_s"] > 0
        # no jump: at the measured state the new law gives the input the old one gives
        u_old = s.u_ref[20] - s.K[20] @ (x - s.x_ref[20])
        u_new = r.u_ref[20] - r.K[20] @ (x - r.x_ref[20])
        np.testing.assert_allclose(u_new, u_old, rtol=1e-14, atol=1e-14)
        assert not np.allclose(r.K[20], s.K[20])      # but the gains are re-solved
    # immutable like any schedule
    with pytest.raises(ValueError):
        r.K[0, 0, 0] = 1.0


def test_nothing_to_replan_after_the_end_and_qdot_schedules_refused(cartpole):
    s, w = _schedule(cartpole)
    end = s.times[-1]
    assert window(s, end + 1.0) == (s.knots - 1, 0)
    assert replan(cartpole, s, s.x_ref[-1], end + 1.0, w) is None
    Xqd = np.hstack([s.x_ref[:, :2], np.zeros((s.knots, 2))])
    sq = schedule_in_qdot(cartpole, Xqd, s.u_ref[:-1], w, ["a", "b"])
    with pytest.raises(ValueError, match="STATE_Q_P"):
        replan(cartpole, sq, s.x_ref[0], 0.0, w)



def _pushed_cost(plant, s, w, x, k0, every=None, reference=None):
    """The tracking cost ``Σ e_kᵀ Q e_k + d_kᵀ R d_k`` (``e_k``, ``d_k``: the state's and the
    input's errors from ``s``'s trajectory) from the pushed state ``x`` at knot ``k0`` to the
    end, under ``s`` or, with ``every``, re-planned every that many knots (with ``reference``:
    the Gauss-Newton step towards it); and its state part."""
    sched, cost_x, cost_u = s, 0.0, 0.0
    for k in range(k0, s.knots - 1):
        if every and (k - k0) % every == 0:
            sched = replan(plant, sched, x, s.times[k], w, reference=reference) or sched
        u = sched.u_ref[k] - sched.K[k] @ (x - sched.x_ref[k])
        x = plant.vi.step(x, u)
        e, d = x - s.x_ref[k + 1], u - s.u_ref[k]
        cost_x, cost_u = cost_x + e @ w.Q @ e, cost_u + d @ w.R @ d
    return cost_x + cost_u, cost_x


def test_the_gauss_newton_step_steers_a_pushed_robot_back_and_swaps_in_on_the_plan(cartpole):
    s, w = _schedule(cartpole, N=80)
    k0, push = 20, np.array([0.0, 0.0, 3.0, -1.5])      # a hard impulse on the momenta
    x = s.x_ref[k0] + push
    fixed, fixed_x = _pushed_cost(cartpole, s, w, x, k0)
    gains_only, _ = _pushed_cost(cartpole, s, w, x, k0, every=1)
    stepped, stepped_x = _pushed_cost(cartpole, s, w, x, k0, every=1, reference=s)
    # re-solving the gains along the prediction leaves the trajectory where it was; a step on
    # the feed-forward at every knot (real-time iteration) brings it back at a lower cost
    assert gains_only == pytest.approx(fixed, rel=1e-9)
    print(f"cart-pole pushed by {push[2:]} on its momenta: cost {fixed:.4g} (states {fixed_x:.4g}) "
          f"under the fixed schedule, {stepped:.4g} (states {stepped_x:.4g}) re-planned every step")
    assert stepped < 0.75 * fixed and stepped_x < fixed_x, (fixed, stepped, fixed_x, stepped_x)
    # one re-plan: its rows are the closed loop of the stepped law from x, so the law, swapped
    # in, gives the plan's input at the measured state; the step's gains are tvlqr's
    r = replan(cartpole, s, x, s.times[k0], w, reference=s)
    H = s.knots - 1 - k0
    rows = slice(k0, k0 + H)
    X, U, A, B = cartpole.vi.closed_loop(x, s.x_ref[rows], s.u_ref[rows], s.K[rows])
    _, P = core.dlqr(A[-1], B[-1], w.Q, w.R)
    K, kff, _, _ = core.tracking_step(A, B, X, U, s.x_ref[k0:k0 + H + 1], s.u_ref[rows], w.Q, w.R, P)
    a = r.info["step_length"]
    assert a in (1.0, 0.5, 0.25)
    Xn, Un, An, Bn = cartpole.vi.closed_loop(x, X[:H], U + a * kff, K, linearize=False)
    assert An is None and Bn is None
    np.testing.assert_array_equal(Xn, cartpole.vi.closed_loop(x, X[:H], U + a * kff, K)[0])
    np.testing.assert_array_equal(r.x_ref[rows], Xn[:H])
    np.testing.assert_array_equal(r.u_ref[rows], Un)
    np.testing.assert_allclose(r.K[rows], core.tvlqr(A, B, w.Q, w.R, P)[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(r.x_ref[k0], x)
    assert np.abs(r.u_ref[k0] - (s.u_ref[k0] - s.K[k0] @ (x - s.x_ref[k0]))).max() > 1e-6   # it steers
    assert replan(cartpole, s, x, s.times[k0], w).info["step_length"] is None
    other, _ = _schedule(cartpole, N=50)
    with pytest.raises(ValueError, match="not the same time base"):
        replan(cartpole, s, x, s.times[k0], w, reference=other)
