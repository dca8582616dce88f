"""``mechnode-linearize`` (core.cli): the command line prints exactly what the library computes,
on a packaged YAML model and on a URDF; bad command lines exit with status 2 and a message
naming the argument. Also core's compile messages (core.cache)."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import core
from core import cli
from core.demo import project_onto_constraints

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(argv, capsys):
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def numbers(v) -> str:
    return ",".join(repr(float(x)) for x in v)


def test_cartpole_json_is_the_library_linearization(capsys):
    q, dq, u = np.array([0.1, -0.3]), np.array([0.5, 2.0]), np.array([1.5])
    status, out, err = run(["cartpole.yaml", "--q", numbers(q), "--dq", "0.5", "2", "--u=1.5",
                            "--format", "json"], capsys)
    assert status == 0, err
    d = json.loads(out)
    s = core.load_system("cartpole.yaml")
    A, B = s.linearize(q, dq, u)
    assert np.array_equal(np.array(d["A"]), A) and np.array_equal(np.array(d["B"]), B)
    assert d["state_names"] == ["x", "theta", "dx", "dtheta"] == s.state_names
    assert d["input_names"] == ["cart_force"] and d["kind"] == "continuous"
    ev = np.array(d["eigenvalues"]["real"]) + 1j * np.array(d["eigenvalues"]["imag"])
    assert np.allclose(np.sort_complex(ev), np.sort_complex(np.linalg.eigvals(A)))
    assert d["controllability_rank"] == core.controllability(A, B).rank == 4 == d["nx"]


def test_cartpole_text_names_rows_and_columns(capsys):
    status, out, _ = run(["cartpole.yaml", "--q", "theta=0.2"], capsys)
    assert status == 0
    assert "state x (4): x, theta, dx, dtheta" in out and "input u (1): cart_force" in out
    assert "at q = [0, 0.2]" in out
    assert "A (4 x 4):" in out and "B (4 x 1):" in out and "eigenvalues of A (4):" in out
    assert "controllability rank: 4 of 4 (controllable)" in out
    A, B = core.load_system("cartpole.yaml").linearize([0, 0.2], [0, 0])
    row = next(line for line in out.splitlines() if line.startswith("dtheta") and "cart_force"
               not in line)
    assert np.allclose([float(v) for v in row.split()[1:]], A[3], rtol=1e-5, atol=1e-12)


def test_urdf_json_and_npz_round_trip(tmp_path, capsys):
    s = core.load_system("arm7.urdf")
    rng = np.random.default_rng(3)
    q, dq = rng.uniform(-1, 1, s.nq), rng.uniform(-1, 1, s.nq)
    path = core.data.model_file("arm7.urdf")
    args = [path, "--q", numbers(q), "--dq", numbers(dq)]
    status, out, err = run(args + ["--format", "json"], capsys)
    assert status == 0, err
    d = json.loads(out)
    A, B = s.linearize(q, dq)
    assert np.array_equal(d["A"], A) and np.array_equal(d["B"], B)
    assert d["state_names"] == s.state_names and d["input_names"] == s.continuous_input_names
    npz = tmp_path / "arm.npz"
    assert run(args + ["--format", "npz", "--output", str(npz)], capsys)[0] == 0
    with np.load(npz) as z:
        assert np.array_equal(z["A"], A) and np.array_equal(z["B"], B)
        assert list(z["state_names"]) == s.state_names
        assert int(z["controllability_rank"]) == d["controllability_rank"] == 14
        assert np.array_equal(z["eigenvalues"].real, d["eigenvalues"]["real"])


def test_discrete_first_and_second_order(tmp_path, capsys):
    s = core.load_system("cartpole.yaml")
    q, dq, dt = np.array([0.0, 0.4]), np.array([0.1, -0.2]), 0.02
    npz = tmp_path / "d.npz"
    status, out, err = run(["cartpole.yaml", "--q", numbers(q), "--dq", numbers(dq), "--discrete",
                            "--dt", str(dt), "--second-order", "--format", "npz", "-o", str(npz)],
                           capsys)
    assert status == 0, err
    vi = core.MidpointVI(s, dt)
    x = vi.discrete_state(q, dq)
    A, B, H = vi.linearize2(x, np.zeros(vi.nu))
    with np.load(npz) as z:
        assert np.array_equal(z["x"], x) and float(z["dt"]) == dt
        assert np.array_equal(z["A"], A) and np.array_equal(z["B"], B)
        assert np.array_equal(z["H"], H) and z["H"].shape == (4, 5, 5)
        assert list(z["state_names"]) == vi.state_names == ["x", "theta", "p_x", "p_theta"]
    status, out, _ = run(["cartpole.yaml", "--discrete", "--dt", "0.02"], capsys)
    assert status == 0 and "discrete linearization, dt = 0.02 s" in out and "H (" not in out
    assert "x_k = [q, p of the dynamic variables" in out


def test_continuous_second_order(tmp_path, capsys):
    s = core.load_system("cartpole.yaml")
    q, dq, u = np.array([0.0, 0.4]), np.array([0.1, -0.2]), np.array([1.5])
    npz = tmp_path / "c.npz"
    status, out, err = run(["cartpole.yaml", "--q", numbers(q), "--dq", numbers(dq), "--u", numbers(u),
                            "--second-order", "--format", "npz", "-o", str(npz)], capsys)
    assert status == 0, err
    A, B, H = s.linearize2(q, dq, u)
    with np.load(npz) as z:
        assert np.array_equal(z["A"], A) and np.array_equal(z["B"], B)
        assert np.array_equal(z["H"], H) and z["H"].shape == (4, 5, 5)
    status, out, err = run(["double_pendulum.yaml", "--second-order"], capsys)
    assert status == 1 and "violates holonomic constraint row" in err     # (off its constraint)


def test_discrete_kinematic_inputs_default_to_held(capsys):
    """The marionette's strings are kinematic: the discrete input's default holds them."""
    from core.examples import marionette_rest_state
    s = core.load_system("marionette.yaml")
    q = marionette_rest_state(s)
    status, out, err = run(["marionette.yaml", "--q", numbers(q), "--discrete", "--dt", "0.01",
                            "--format", "json"], capsys)
    assert status == 0, err
    d = json.loads(out)
    vi = core.MidpointVI(s, 0.01)
    u = np.concatenate([np.zeros(s.nu), q[vi.kinematic_index]])
    A, B = vi.linearize(vi.discrete_state(q, np.zeros(s.nq)), u)
    assert np.array_equal(d["u"], u) and np.array_equal(d["A"], A) and np.array_equal(d["B"], B)
    assert d["input_names"] == vi.input_names


def test_minimal_on_the_constrained_double_pendulum(capsys):
    s = core.load_system("double_pendulum.yaml")
    q = project_onto_constraints(s, [0.5246, 1.0472])
    Dh = s.constraint(q, 1)[1]
    dq = np.linalg.svd(Dh)[2][-1]            # along the constraint
    status, out, err = run(["double_pendulum.yaml", "--q", numbers(q), "--dq", numbers(dq),
                            "--u", "2", "--minimal", "--format", "json"], capsys)
    assert status == 0, err
    d = json.loads(out)
    A, B, info = s.linearize_minimal(q, dq, [2.0])
    assert np.array_equal(d["A"], A) and np.array_equal(d["B"], B)
    assert d["state_names"] == info.state_names and len(d["state_names"]) == 2
    assert d["kind"] == "minimal"


def test_off_the_constraints_is_refused_with_the_reason(capsys):
    status, _, err = run(["double_pendulum.yaml"], capsys)     # q = 0 violates h(q) = 0
    assert status == 1 and "cannot linearize double_pendulum.yaml" in err
    assert "Traceback" not in err
    assert run(["double_pendulum.yaml", "--residual-limit", "none"], capsys)[0] == 0


@pytest.mark.parametrize("argv, words", [
    (["cartpole.yaml", "--q", "1,2,3"], ["--q", "2 values (x, theta)", "got 3"]),
    (["cartpole.yaml", "--dq", "1"], ["--dq", "2 values (x, theta)", "got 1"]),
    (["cartpole.yaml", "--u", "1", "2"], ["--u", "1 value (cart_force)"]),
    (["cartpole.yaml", "--q", "phi=1"], ["--q", "no coordinate 'phi'", "theta"]),
    (["cartpole.yaml", "--q", "1,abc"], ["--q", "'abc' is not a number"]),
    (["cartpole.yaml", "--second-order", "--minimal"], ["--second-order does not combine with --minimal"]),
    (["cartpole.yaml", "--discrete"], ["--discrete needs --dt"]),
    (["cartpole.yaml", "--discrete", "--dt", "1e308"], ["--dt: dt must be a time step from 1e-09 s to 1000 s",
                                                         "got 1e+308"]),
    (["cartpole.yaml", "--discrete", "--dt", "1e-320"], ["--dt: dt must be a time step", "got 1e-320"]),
    (["cartpole.yaml", "--discrete", "--dt", "0"], ["--dt: dt must be a finite positive number, got 0.0"]),
    (["cartpole.yaml", "--discrete", "--dt", "0.01", "--u", "1,2"],
     ["--u", "1 value (cart_force)"]),
    (["cartpole.yaml", "--minimal", "--discrete", "--dt", "0.01"], ["--minimal"]),
    (["cartpole.yaml", "--format", "npz"], ["--output"]),
    (["cartpole.yaml", "--floating-base"], ["URDF"]),
])
def test_bad_command_lines_exit_2_naming_the_argument(argv, words, capsys):
    status, out, err = run(argv, capsys)
    assert status == 2 and out == ""
    assert err.startswith("mechnode-linearize: error: ") and "Traceback" not in err
    for w in words:
        assert w in err, (w, err)


def test_missing_model_exits_1(capsys):
    status, _, err = run(["no_such_model.yaml"], capsys)
    assert status == 1 and "cannot load no_such_model.yaml" in err


def test_python_m_core_cli_runs(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "core.cli", "pendulum.yaml", "--q", "0.3"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "controllability rank: 2 of 2" in p.stdout


def test_compilation_of_a_core_kernel_is_announced(monkeypatch):
    """A cache miss of one of core's kernels prints what compiles and how long it took; a
    kernel of another module (and a kernel already compiled) says nothing."""
    import numba

    from core import cache
    stream = io.StringIO()
    cache.report_compilation(stream=stream)
    try:
        def inner(x):
            return 2.0 * x

        def outer(x):
            return jitted_inner(x) + 1.0

        inner.__module__ = outer.__module__ = "core.fake_for_test"
        jitted_inner = numba.njit(inner)
        jitted = numba.njit(outer)
        assert jitted(1.0) == 3.0 and jitted(2.0) == 5.0
        other = numba.njit(lambda x: x + 1.0)
        assert other(1.0) == 2.0
    finally:
        cache.report_compilation()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("core: numba is compiling core's kernels")
    # a whole line when it starts, one when it ends (processes sharing a stderr do not mix)
    assert len(lines) == 3 and lines[1] == "core: compiling core.fake_for_test.outer ..."
    assert re.fullmatch(r"core: compiled core\.fake_for_test\.outer in \d+\.\d s", lines[2])


def test_compile_messages_count_and_tag(monkeypatch, tmp_path):
    """With a count expected (core.warmup.run_shared: a team of processes) the lines say which
    kernel of how many; a team member's lines carry its tag, and the count is the team's."""
    import numba

    from core import cache
    shared = tmp_path / "compiled"
    monkeypatch.setenv(cache.TAG_VARIABLE, "2/2")
    monkeypatch.setenv(cache.PROGRESS_VARIABLE, f"5:{shared}")
    stream = io.StringIO()
    cache.report_compilation(stream=stream)
    try:
        shared.write_text("core.other_process.kernel\n")       # compiled by another member
        env = cache.compile_environment("3/3")
        assert env[cache.TAG_VARIABLE] == "3/3" and env[cache.PROGRESS_VARIABLE] == f"5:{shared}"

        def f(x):
            return x + 1.0
        f.__module__ = "core.fake_for_count"
        assert numba.njit(f)(1.0) == 2.0
    finally:
        monkeypatch.delenv(cache.TAG_VARIABLE)
        monkeypatch.delenv(cache.PROGRESS_VARIABLE)
        cache.report_compilation()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("core[2/2]: numba is compiling")
    assert lines[1] == "core[2/2]: compiling core.fake_for_count.f (kernel 2 of ~5) ..."
    assert re.fullmatch(r"core\[2/2\]: compiled core\.fake_for_count\.f in \d+\.\d s \(kernel 2 of ~5; "
                        r"\d+ s since the first\)", lines[2])
    assert shared.read_text().splitlines() == ["core.other_process.kernel", "core.fake_for_count.f"]


# ------------------------------------------------------------------ progress of long work
def test_linearize_trajectory_progress_gives_the_same_stacks(capsys):
    s = core.load_system("cartpole.yaml")
    vi = core.MidpointVI(s, 0.01)
    N = 120
    rng = np.random.default_rng(0)
    U = rng.uniform(-1, 1, (N, vi.nu))
    X = np.empty((N + 1, vi.nx))
    X[0] = vi.discrete_state(np.array([0.0, 0.3]), np.zeros(2))
    for k in range(N):
        X[k + 1] = vi.step(X[k], U[k])
    A, B, H = vi.linearize_trajectory(X, U, second_order=True)
    seen = []
    A2, B2, H2 = vi.linearize_trajectory(X, U, second_order=True,
                                         progress=lambda done, total: seen.append((done, total)))
    assert np.array_equal(A, A2) and np.array_equal(B, B2) and np.array_equal(H, H2)
    assert seen[0] == (0, N) and seen[-1] == (N, N) and len(seen) == 1 + 40   # blocks of 3
    A3, B3 = vi.linearize_trajectory(X, U, progress=True)
    assert np.array_equal(A, A3) and np.array_equal(B, B3)
    err = capsys.readouterr().err
    assert f"linearizing {N}/{N} steps [" in err and err.endswith("\n")


def test_linearize_trajectory_progress_names_the_failing_step():
    s = core.load_system("cartpole.yaml")
    vi = core.MidpointVI(s, 0.01)
    X, U = np.zeros((101, vi.nx)), np.zeros((100, vi.nu))
    X[77, 1] = 1e200                                   # a step that cannot be solved
    with pytest.raises(core.errors.IntegratorError, match="at step 77") as plain:
        vi.linearize_trajectory(X, U)
    with pytest.raises(core.errors.IntegratorError, match="at step 77") as blocked:
        vi.linearize_trajectory(X, U, progress=lambda done, total: None)
    assert plain.value.step == blocked.value.step == 77


def test_optimizer_verbose_prints_a_line_per_iteration(capsys):
    s = core.load_system("pendulum.yaml")
    vi = core.MidpointVI(s, 0.05)
    N = 20
    x_ref = np.zeros((N + 1, vi.nx))
    x_ref[:, 0] = np.linspace(0.0, 0.5, N + 1)
    result = core.optimize_trajectory(vi, np.zeros(vi.nx), x_ref, np.zeros((N, vi.nu)),
                                      np.eye(vi.nx), np.eye(vi.nu), method="first_order",
                                      max_iterations=3, verbose=True)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("iter")]
    assert len(lines) == len(result.history) >= 2
    assert all("cost" in ln and "step" in ln and "|grad|" in ln for ln in lines)


def test_a_compilation_ended_by_the_process_ending_is_not_called_a_failure():
    from core.cache import _outcome
    assert _outcome(None) == "compiled"
    assert _outcome((SystemExit, SystemExit(143), None)) == "stopped compiling"     # SIGTERM (node shutdown)
    assert _outcome((KeyboardInterrupt, KeyboardInterrupt(), None)) == "stopped compiling"
    assert _outcome((TypeError, TypeError("x"), None)) == "failed to compile"
