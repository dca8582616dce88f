"""Armature (rotor inertia, ``System.add_armature``) and locked variables (``System.lock``) on
random systems, independent of Pinocchio (``test_robot_files.py`` checks both against it on real
robots).

Armature: the mass matrix, energy and momentum against the plain-numpy reference of ``randsys``
(``M + diag(armature)``); the continuous dynamics and their first and second order, and the
integrator's step and first and second order, against central finite differences on free and
constrained random trees, a 15-frame tree (the DEL tree LU) and a coupled (mimic) system; the
O(n) articulated-body ``qdd`` against the factored one.

Locks: a locked variable is the same system with the variable written as a constant (its
inputs, springs, damping and armature dropped), in every computation; the YAML keys; refusals.
"""
from __future__ import annotations

import numpy as np
import pytest

import core
from core.continuous.dynamics import dynamics_and_derivatives
from core.discrete.step import sparse_newton
from core.errors import ModelError

from randsys import (
    Reference,
    assert_close,
    build_system,
    continuous_checks,
    coupled_two_links,
    discrete_checks,
    frame_transform,
    random_system,
)

FREE = [2, 5, 9]
CONSTRAINED = [103, 110, 117]


def _with_armature(seed, **kw):
    """A random system with a random armature on most variables (the reference knows it)."""
    s, q, dq, u = random_system(seed, **kw)
    rng = np.random.default_rng(seed + 313)
    armature = {n: float(rng.uniform(0.05, 0.5)) for n in s.config_names if rng.random() < 0.7}
    armature = armature or {s.config_names[0]: 0.2}
    spec = dict(s.spec, armature=armature)
    system = build_system(spec, use_api=seed % 2 == 1)
    system.spec, system.reference = spec, Reference(spec)
    return system, q, dq, u


@pytest.mark.parametrize("seed", FREE + CONSTRAINED)
def test_mass_matrix_energy_and_momentum(seed):
    s, q, dq, u = _with_armature(seed, constraints=0 if seed in FREE else 2)
    ref = s.reference
    d = s.lagrangian_derivatives(q, dq)
    assert_close(d.Lvv, ref.mass_matrix(q), "M with armature", tol=1e-12)
    assert_close(s.momentum(q, dq), ref.mass_matrix(q) @ dq, "momentum", tol=1e-12)
    assert s.energy(q, dq) == pytest.approx(ref.energy(q, dq), rel=1e-12)
    bare = Reference({k: v for k, v in s.spec.items() if k != "armature"})
    assert np.abs(ref.mass_matrix(q) - bare.mass_matrix(q)).max() >= 0.05      # (it is there)


@pytest.mark.parametrize("seed", FREE)
def test_articulated_body_qdd_equals_the_factored_one(seed):
    """``qdd`` without constraints takes the O(n) recursion, whose pivots gain the armature;
    the factored path (the one ``linearize`` takes) must agree."""
    s, q, dq, u = _with_armature(seed, constraints=0, velocity_constraints=0)
    assert_close(s.qdd(q, dq, u), dynamics_and_derivatives(s, q, dq, u, True)[0], "ABA vs factored", tol=1e-12)


@pytest.mark.parametrize("seed", FREE)
def test_continuous_first_and_second_order(seed):
    continuous_checks(*_with_armature(seed, constraints=0, velocity_constraints=0))


@pytest.mark.parametrize("seed", CONSTRAINED)
def test_continuous_first_and_second_order_constrained(seed):
    s, q, dq, u = _with_armature(seed, constraints=2, velocity_constraints=1)
    assert s.model.nh + s.model.nv >= 2
    continuous_checks(s, q, dq, u)


@pytest.mark.parametrize("seed", FREE + CONSTRAINED)
def test_integrator_first_and_second_order(seed):
    s, q, dq, u = _with_armature(seed, constraints=0 if seed in FREE else 2, velocity_constraints=0)
    vi, x = discrete_checks(s, q, dq, u)
    bare = build_system({k: v for k, v in s.spec.items() if k != "armature"})
    assert np.abs(vi.step(x, u) - core.MidpointVI(bare, 0.01, tolerance=1e-13).step(x, u)).max() > 1e-6


def test_integrator_on_a_tree_takes_the_tree_lu():
    s, q, dq, u = _with_armature(204, constraints=0, velocity_constraints=0, n_frames=(15, 15))
    assert sparse_newton(s.model, 0)
    discrete_checks(s, q, dq, u)


def _coupled(armature_on: str):
    """Two links whose second joint mimics the first (-0.7 q + 0.2), a rotor on one of them."""
    s = coupled_two_links()
    s.add_armature(armature_on, 0.3)
    return s


def test_armature_on_a_coupled_system():
    """A rotor on the mimic joint spins at -0.7 times the leader's speed: it adds 0.49 * 0.3 to
    the leader's M (a rotor on the leader adds 0.3)."""
    q, dq, u = np.array([0.4]), np.array([1.1]), np.array([0.3])
    for on, added in (("a", 0.3), ("b", 0.49 * 0.3)):
        s = _coupled(on)
        bare = _coupled(on)
        bare.add_armature(on, 0.0)
        M, M0 = (x.lagrangian_derivatives(q, dq).Lvv for x in (s, bare))
        assert M[0, 0] - M0[0, 0] == pytest.approx(added, rel=1e-12)
        continuous_checks(s, q, dq, u)
        discrete_checks(s, q, dq, u)


def test_armature_refusals_and_yaml():
    spec = {"frames": [{"name": "link", "rz": "th", "mass": 1.0, "com": [0.5, 0, 0]}],
            "inputs": [{"type": "torque", "config": "th"}], "armature": {"th": 0.25}}
    s = core.load_system(spec)
    assert s.armature == {"th": 0.25}
    assert s.lagrangian_derivatives([0.0], [0.0]).Lvv[0, 0] == pytest.approx(0.25 + 0.25)
    with pytest.raises(ModelError, match=r"armature of 'th': must be non-negative, got -1"):
        core.load_system(dict(spec, armature={"th": -1.0}))
    with pytest.raises(ModelError, match=r"armature: unknown configuration variable 'psi'"):
        core.load_system(dict(spec, armature={"psi": 1.0}))
    with pytest.raises(ModelError, match=r"armature: expected a mapping \{variable: value\}"):
        core.load_system(dict(spec, armature=[0.1]))


# ---------------------------------------------------------------------------------- locks
def _locked_pair(seed, **kw):
    """A random system with a variable locked at a value, and the same system written with
    that variable as a constant (its inputs, springs, damping and armature removed): the first
    variable whose lock leaves the constraints (if any) independent."""
    s, q, dq, u = _with_armature(seed, **kw)
    for k in range(s.nq):
        pair = _lock_one(s, q, dq, u, k)
        try:
            pair[1].linearize(*pair[2:], residual_limit=None)
        except core.errors.SingularMatrixError:
            continue
        return pair
    raise AssertionError(f"seed {seed}: every lock makes the constraints dependent")


def _lock_one(s, q, dq, u, k):
    spec = s.spec
    name = s.config_names[k]
    value = float(q[k])
    frames = []
    for f in spec["frames"]:
        kind, v = frame_transform(f)
        frames.append(dict(f, **{kind: value}) if v == name else f)
    constant = dict(spec, frames=frames,
                    springs=[x for x in spec.get("springs", []) if x.get("config") != name],
                    damping=[x for x in spec.get("damping", []) if x["config"] != name],
                    inputs=[x for x in spec.get("inputs", []) if x.get("config") != name],
                    armature={n: a for n, a in spec["armature"].items() if n != name})
    locked = dict(spec, locked={name: value})
    keep = np.arange(s.nq) != k
    kept_inputs = [i for i, x in enumerate(Reference(spec).inputs) if not (x[0] == "torque" and x[1] == k)]
    return build_system(locked), build_system(constant), q[keep], dq[keep], u[kept_inputs]


@pytest.mark.parametrize("seed", FREE + CONSTRAINED)
def test_a_locked_variable_is_a_constant(seed):
    locked, constant, q, dq, u = _locked_pair(seed, constraints=0 if seed in FREE else 1, velocity_constraints=0)
    assert locked.config_names == constant.config_names
    assert locked.input_names == constant.input_names
    for a, b, what in zip(locked.linearize2(q, dq, u, residual_limit=None),
                          constant.linearize2(q, dq, u, residual_limit=None), "ABH", strict=True):
        assert_close(a, b, what, tol=1e-12)
    vl, vc = core.MidpointVI(locked, 0.01, tolerance=1e-13), core.MidpointVI(constant, 0.01, tolerance=1e-13)
    x = vl.discrete_state(q, dq)
    for a, b, what in zip(vl.linearize2(x, u), vc.linearize2(x, u), "ABH", strict=True):
        assert_close(a, b, f"VI {what}", tol=1e-10)
    # the locked variable's frame carries no body: it is folded into its parent
    model = locked.model
    for f in range(model.nf):
        if model.frame_qindex[f] < 0 and model.frame_parent[f] >= 0:
            assert model.frame_mass[f] == 0.0 and not model.frame_inertia[f].any()


def test_lock_refusals():
    s = core.System(gravity=[0.0, 0.0, -9.81])
    s.add_frame("a", rz="th", mass=1.0, com=[0.5, 0, 0])
    s.add_frame("b", parent="a", offset={"translation": [1, 0, 0]}, rz="phi", mass=1.0, com=[0.5, 0, 0])
    s.set_joint_limits("phi", lower=-1.0, upper=1.0)
    s.add_mimic("phi", "th", 2.0)
    s.lock("phi", 0.3)
    with pytest.raises(ModelError, match=r"lock 'phi': it mimics 'th'; lock 'th'"):
        s.compile()
    s = core.System(gravity=[0.0, 0.0, -9.81])
    s.add_frame("a", rz="th", mass=1.0, com=[0.5, 0, 0])
    s.add_frame("b", parent="a", offset={"translation": [1, 0, 0]}, rz="phi", mass=1.0, com=[0.5, 0, 0])
    s.set_joint_limits("phi", lower=-1.0, upper=1.0)
    s.lock("phi", 2.0)
    with pytest.raises(ModelError, match=r"lock 'phi': value 2.0 is outside its limits \[-1.0, 1.0\]"):
        s.compile()
    s.lock("phi", 0.5)
    s.lock("psi", 0.0)
    with pytest.raises(ModelError, match=r"lock 'psi': not a variable that drives a frame"):
        s.compile()
    s._locked.pop("psi")
    assert s.config_names == ["th"] and s.locked_joints == {"phi": 0.5}
    assert list(s.joint_limits) == ["th"]
    s.set_kinematic(["phi"])
    with pytest.raises(ModelError, match=r"kinematic: 'phi' is locked"):
        s.compile()
    with pytest.raises(ModelError, match=r"lock of 'th': must be finite"):
        s.lock("th", float("nan"))


def test_locking_a_leader_freezes_its_mimic_and_everything_locked_is_a_fixed_system():
    s = core.System(gravity=[0.0, 0.0, -9.81])
    s.add_frame("a", rz="th", mass=1.0, com=[0.5, 0, 0])
    s.add_frame("b", parent="a", offset={"translation": [1, 0, 0]}, rz="phi", mass=1.0, com=[0.5, 0, 0])
    s.add_mimic("phi", "th", 2.0, 0.1)
    s.add_input("torque", config="th")
    s.lock("th", 0.4)
    assert s.locked_joints == {"th": 0.4, "phi": 0.9}
    assert (s.nq, s.nu, s.mimic_joints) == (0, 0, {})
    assert s.qdd(np.zeros(0), np.zeros(0)).shape == (0,)
