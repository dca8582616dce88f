"""Reduced versions of the paper's examples (Sec. VIII): examples/pendulum_optimal_control.py
and examples/marionette_lqr.py.

Pendulum: the infeasible step reference of Eq. (35) with the published weights, on N = 60 steps
(the step at k = 30), optimized by the second-order (Newton) and first-order (Gauss-Newton)
methods from u = 0 with the authors' stopping rule (|directional derivative| < 1e-6); then LQR
about the optimum and the closed/open loop from x(0) = [1, 1]. Tests on the paper's full setting
(N = 100): both methods from u = 0; Fig. 3's two curves under the authors' set-up (four quasi
iterations, then Newton or steepest descent, trep's Armijo constants); Newton after trep's
default warm-up of ten quasi iterations.
Marionette: 3 s of the 10 s reference at dt = 0.02; a 0.1 rad torso perturbation.
"""
import importlib.util
import os
import sys

import numpy as np
import pytest

import core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    path = os.path.join(ROOT, "examples", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


pendulum = _load("pendulum_optimal_control")
marionette = _load("marionette_lqr")

TOL = 1e-6


# =================================================================================== pendulum
@pytest.fixture(scope="module")
def pend60():
    problem = pendulum.pendulum_problem(N=60)
    runs = {m: pendulum.optimize(problem, m, tol=TOL, max_iterations=300)
            for m in ("second_order", "first_order")}
    return problem, runs


def test_pendulum_reference_is_the_infeasible_step(pend60):
    problem, _ = pend60
    assert problem.x_ref.shape == (61, 2) and problem.u_ref.shape == (60, 1)
    assert np.all(problem.x_ref[:30, 0] == 0.0) and np.all(problem.x_ref[30:, 0] == np.pi)
    assert np.all(problem.x_ref[:, 1] == 0.0) and np.all(problem.u_ref == 0.0)
    np.testing.assert_array_equal(np.diag(problem.Q), [1000.0, 1.0])
    assert problem.R[0, 0] == 50.0
    np.testing.assert_array_equal(problem.Q_N, problem.Q)
    # cost of u = 0 (the pendulum stays at 0): 1/2 * 1000 * pi^2 for each of the 31 steps at pi
    assert pendulum.initial_cost(problem) == pytest.approx(0.5 * 1000 * np.pi ** 2 * 31, rel=1e-12)


def test_pendulum_both_methods_converge_to_the_same_cost(pend60):
    _, runs = pend60
    second, first = runs["second_order"].result, runs["first_order"].result
    assert second.converged and first.converged
    assert abs(second.history[-1]["slope"]) < TOL and abs(first.history[-1]["slope"]) < TOL
    assert second.cost == pytest.approx(first.cost, rel=1e-9)
    assert second.cost < 0.2 * runs["second_order"].result.history[0]["cost"]
    # the same trajectory to the accuracy the stopping rule |slope| < 1e-6 gives a linearly
    # converging method
    np.testing.assert_allclose(second.u, first.u, atol=1e-3)
    np.testing.assert_allclose(second.x, first.x, atol=1e-4)
    # the optimum swings up: it ends near the upright position
    assert abs(second.x[-1, 0] - np.pi) < 0.1


def test_pendulum_second_order_needs_fewer_iterations(pend60):
    _, runs = pend60
    it2 = runs["second_order"].iterations_to(TOL)
    it1 = runs["first_order"].iterations_to(TOL)
    assert it2 is not None and it1 is not None
    assert it2 < it1
    # Newton's local convergence is quadratic: the last steps shrink the slope fast
    s = [abs(h["slope"]) for h in runs["second_order"].result.history]
    assert s[-1] < 1e-6 * s[-3]


def test_pendulum_closed_loop_converges_open_loop_does_not(pend60):
    problem, runs = pend60
    best = runs["second_order"].result
    fb = pendulum.stabilize(problem, best.x, best.u, x0_perturbed=(1.0, 1.0))
    ec, eo = fb.error_closed, fb.error_open
    assert ec[0] == pytest.approx(np.sqrt(2.0)) and eo[0] == pytest.approx(np.sqrt(2.0))
    assert ec[-1] < 1e-2 * ec[0]
    assert np.max(ec[-10:]) < 1e-2 * ec[0]
    assert np.mean(eo[-15:]) > 0.5 * eo[0]
    # the feedback uses the paper's law u = u_d - K (x - x_d): check one step by hand
    k = 3
    u_k = best.u[k] - fb.K[k] @ (fb.x_closed[k] - best.x[k])
    np.testing.assert_allclose(problem.system.step(fb.x_closed[k], u_k), fb.x_closed[k + 1],
                               atol=1e-12)


def _paper_run(method, **options):
    problem = pendulum.pendulum_problem(N=100)
    return pendulum.optimize(problem, method, tol=TOL, **options).result


def test_pendulum_paper_second_order_curve():
    """Fig. 3's second-order curve under the authors' set-up (their script: Q = diag(1000, 1),
    R = 50, Q_N = Q, tol 1e-6, four quasi iterations then Newton, trep's Armijo constants):
    14 iterations in the paper, 14 ± 1 here, to the optimum J = 13297.3788946."""
    result = _paper_run("second_order", max_iterations=100, **pendulum.PAPER_WARM_UP)
    assert result.converged, result.message
    assert abs(result.iterations - 14) <= 1
    assert result.iterations == pendulum.SECOND_ORDER_ITERATIONS
    assert round(result.cost, 7) == 13297.3788946
    models = [h["model"] for h in result.history[1:]]
    assert models[:4] == ["gauss_newton"] * 4 and models[-3:] == ["newton"] * 3


@pytest.mark.slow   # about 30 s: some 650 steepest-descent iterations on N = 100
def test_pendulum_paper_first_order_curve():
    """Fig. 3's first-order curve: four quasi iterations, then steepest descent (trep's
    "steepest", not Gauss-Newton): 653 iterations in the paper; the same optimum."""
    result = _paper_run("steepest_descent", max_iterations=1000, **pendulum.PAPER_WARM_UP)
    assert result.converged, result.message
    assert result.iterations == pendulum.FIRST_ORDER_ITERATIONS
    assert abs(result.iterations - 653) <= 10
    assert round(result.cost, 7) == 13297.3788946
    assert {h["model"] for h in result.history[5:]} == {"identity"}


@pytest.mark.parametrize("warm_up", [10, 0])
def test_pendulum_newton_does_not_stall(warm_up):
    """trep's default warm-up (ten quasi iterations, trep's Armijo constants) ends near a saddle
    point of J (J ≈ 95,633) where the Newton model is not convex and its direction ascends;
    trep's fallback to quasi then creeps (J decreases by ~4e-3 per iteration). Line-searching the
    reversed Newton direction too leaves the saddle: Newton converges from both starts."""
    options = dict(first_method_iterations=warm_up, max_iterations=60,
                   **pendulum.core.OptimizerOptions.TREP_ARMIJO)
    result = _paper_run("second_order", **options)
    assert result.converged, result.message
    assert result.iterations <= 30
    assert round(result.cost, 7) == 13297.3788946
    if warm_up == 10:
        assert 95633 < result.history[10]["cost"] < 95635
        assert "newton_reversed" in {h["model"] for h in result.history[11:]}
        # trep's rule exactly (no reversed direction): stuck at the saddle, Gauss-Newton steps
        stuck = _paper_run("second_order", **dict(options, negative_curvature=False))
        assert not stuck.converged and stuck.cost > 95632
        assert {h["model"] for h in stuck.history[11:]} == {"gauss_newton"}


@pytest.mark.slow   # about 10 s: N = 100, both methods to the paper's tolerance
def test_pendulum_full_paper_setting():
    """N = 100, dt = 0.1 (Sec. VIII-A): both methods converge from u = 0 (no warm-up, default
    line search) to the same trajectory, the second-order one in far fewer iterations; LQR about
    the optimum stabilizes the perturbed start, the open loop does not."""
    problem = pendulum.pendulum_problem(N=100)
    second = pendulum.optimize(problem, "second_order", tol=TOL, max_iterations=100)
    first = pendulum.optimize(problem, "first_order", tol=TOL, max_iterations=1500)
    for run in (second, first):
        assert run.result.converged, run.result.message
        assert run.result.cost == pytest.approx(13297.3788946, rel=1e-10)
    assert second.result.iterations <= 40 and first.result.iterations >= 10 * 40
    np.testing.assert_allclose(second.result.u, first.result.u, atol=1e-4)
    np.testing.assert_allclose(second.result.x, first.result.x, atol=1e-5)
    # Newton iterations that fell back to Gauss-Newton happen only far from the optimum
    models = [h["model"] for h in second.result.history[1:]]
    assert models[-3:] == ["newton"] * 3
    fb = pendulum.stabilize(problem, second.result.x, second.result.u)
    assert fb.error_closed[-1] < 1e-3 * fb.error_closed[0]
    assert np.mean(fb.error_open[-25:]) > 0.5 * fb.error_open[0]


def test_pendulum_script_quick(tmp_path, capsys):
    assert pendulum.main(["--quick", "--N", "20", "--plot", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for method in pendulum.METHODS:
        assert f"{method} " in out
    assert "converged=False" not in out and "closed loop" in out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "skipping the plots" in out
    else:
        for name in ("pendulum_convergence.png", "pendulum_feedback.png"):
            assert (tmp_path / name).stat().st_size > 0


# ================================================================================= marionette
@pytest.fixture(scope="module")
def mario():
    ref = marionette.reference(duration=3.0, dt=0.02)
    return ref, marionette.stabilize(ref, delta=0.1)


def test_marionette_dimensions_and_reference(mario):
    ref, _ = mario
    vi = ref.vi
    assert (vi.nq, vi.nd, vi.nk, vi.system.model.nh) == (40, 22, 18, 6)
    assert (vi.nx, vi.nu) == (80, 18)
    assert ref.x.shape == (151, 80) and ref.u.shape == (150, 18)
    # the reference is a trajectory of the integrator and satisfies the strings
    for k in (0, 37, 149):
        np.testing.assert_allclose(ref.system.step(ref.x[k], ref.u[k]), ref.x[k + 1], atol=1e-9)
        assert np.max(np.abs(vi.system.constraint(ref.x[k + 1, :vi.nq]))) < 1e-9
    # only the arm and leg string lengths move, by +/-0.1 sin(0.6 pi t)
    kin_names = [vi.system.config_names[i] for i in vi.kinematic_index]
    t1 = ref.dt * np.arange(1, ref.N + 1)
    offsets = ref.u - ref.x[0, vi.kinematic_index]
    for j, name in enumerate(kin_names):
        sign = marionette.MOVING_STRINGS.get(name, 0.0)
        np.testing.assert_allclose(offsets[:, j], sign * 0.1 * np.sin(0.6 * np.pi * t1), atol=1e-12)


def test_marionette_rest_state_is_an_equilibrium(mario):
    ref, _ = mario
    vi = ref.vi
    q0 = ref.x[0, :vi.nq]
    Q, _, _ = vi.simulate(q0, np.zeros(vi.nd), np.tile(q0[vi.kinematic_index], (50, 1)))
    assert np.max(np.abs(Q - q0)) < 1e-9


def test_marionette_perturbation_is_consistent(mario):
    ref, run = mario
    vi = ref.vi
    i = vi.system.config_names.index("torso_psi")
    assert run.x0[i] - ref.x[0, i] == pytest.approx(0.1, abs=1e-12)
    assert np.max(np.abs(vi.system.constraint(run.x0[:vi.nq]))) < 1e-10
    np.testing.assert_array_equal(run.x0[vi.kinematic_index], ref.x[0, vi.kinematic_index])


def test_marionette_closed_loop_converges_open_loop_persists(mario):
    ref, run = mario
    ec, eo = run.error_closed, run.error_open
    assert ec[0] == pytest.approx(eo[0]) and ec[0] >= 0.1
    tail = slice(3 * ref.N // 4, None)
    assert ec[-1] < 0.1 * ec[0]
    assert np.mean(ec[tail]) < 0.1 * ec[0]
    assert np.mean(eo[tail]) > 0.3 * eo[0]
    assert eo[-1] > 5 * ec[-1]
    # the gains act on all 80 states through the 18 string inputs
    assert run.K.shape == (150, 18, 80) and np.all(np.isfinite(run.K))


def test_marionette_script_quick(tmp_path, capsys):
    assert marionette.main(["--duration", "0.4", "--dt", "0.02", "--plot", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "closed loop" in out and "open loop" in out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "skipping the plots" in out
    else:
        for name in ("marionette_error.png", "marionette_torso.png"):
            assert (tmp_path / name).stat().st_size > 0


# =================================================================================== core.demo
MODELS = [m for m in core.data.model_names() if m.endswith(".yaml")]


@pytest.mark.parametrize("model", MODELS)
def test_library_demo_linearizes_every_model(model, capsys):
    """``python -m core.demo <model>`` picks a valid state for each model (the
    marionette: its rest state; q = 0 is singular there) and prints both linearizations."""
    from core import demo
    assert demo.main([model]) == 0
    out = capsys.readouterr().out
    assert "operating point:" in out and "A_d =" in out


def test_library_demo_says_why_it_cannot_linearize(tmp_path, capsys):
    from core import demo
    path = tmp_path / "idle.yaml"
    path.write_text("frames:\n- {name: a, parent: world, rx: idle}\n")   # moves no mass
    assert demo.main([str(path)]) == 1
    err = capsys.readouterr().err
    assert "cannot linearize" in err and "mass matrix is singular" in err and "idle" in err
    path.write_text("frames:\n- {name: a, parent: world, tx: x, mass: 1.0}\n"
                    "constraints:\n- {type: distance, frame1: world, frame2: a, distance: 1.0}\n")
    assert demo.main([str(path)]) == 1            # x = 0 can never be 1 from the world origin
    assert "Gauss-Newton did not reach them" in capsys.readouterr().err


# =================================================================================== Solo12
solo = _load("solo12_balance")


def test_solo12_recovers_from_a_push(tmp_path):
    """The linearized closed loop after a 0.3 m/s lateral push: the base moves and comes back,
    the feet stay (the motion is in the contacts' null space), the torques stay bounded; the
    sway is tracked on the nonlinear dynamics; the script runs and writes its figure."""
    push = solo.push_response(duration=2.0)
    system, st = solo.stand()
    n = system.nv
    assert abs(push.x[0, n + 1] - solo.PUSH) < 1e-12
    lateral = np.abs(push.x[:, 1])
    assert lateral.max() > 1e-4 and lateral[-1] < 1e-6 * lateral.max()
    Dh = system.constraint(st.q, 1)[1]
    assert np.abs(push.x[:, n:] @ Dh.T).max() < 1e-9            # the feet at rest all along
    assert np.all(np.isfinite(push.u)) and np.abs(push.u).max() < 20.0
    sway = solo.sway_tracking(duration=1.0)
    error = np.linalg.norm(sway.base - sway.reference, axis=1)
    assert error.max() < 1e-3 and error[-1] < 2e-4 and np.abs(sway.reference[:, 1]).max() > 0.019
    path = tmp_path / "push.png"
    solo.main(["--plot", str(path)])
    assert path.stat().st_size > 10_000
    assert solo.plot(push, sway, str(path)) == ["base displacement (mm)", "base y (mm)", "joint torques (N m)",
                                                 "base tracking error (mm)"]
