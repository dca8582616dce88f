"""Compiling (or loading from numba's cache) core's kernels ahead of their first use, in parts,
in one process or shared by several: ``python -m core.warmup PART [PART ...]``.

numba compiles one kernel at a time per process, and compiling is most of a cold start. A
kernel's types do not depend on the model (a :class:`core.datatypes.Model` is one record type whatever it
holds), so every part runs on a two-link chain and the caller loads the result from the cache.

The parts (:data:`PARTS`; each names the kernels it calls, for the count of what is left):

* ``state``: the input matrix, the Legendre transform and its inverse, the feedback law (what a
  controller's command path calls), the Lagrangian's derivatives;
* ``step``: one step of the integrator (the DEL solve), and the steps from the knots of a
  trajectory;
* ``hold``: a rest state, its holding inputs and its one-step linearization (a hold about it;
  as a stack of one state, so the trajectory kernels);
* ``inverse``: DEL inverse dynamics and discrete momenta; ``linearize``: the first-order
  linearization of solved steps along a trajectory (it does not solve them, so it needs no
  part before it); ``lqr``: the Riccati pass; ``optimize``: the first-order trajectory
  optimizer; ``closed_loop``: the steps under a feedback law (the optimizer's line search, a
  re-plan);
* ``continuous``, ``discrete``, ``all``: :meth:`core.MidpointVI.warm_up`'s parts (``all``: every
  kernel, second order included);
* ``stacks``: the kernels of stacked calls (``System.qdd``/``linearize`` and
  ``MidpointVI.step`` on stacks of states, ``linearize_trajectory`` in parallel threads, the
  Legendre transform of many states), each compiled on its first use otherwise (about a minute
  apiece on a cold cache).

``--work DIR`` shares the parts between processes: each process takes the next part nobody has
taken (a file ``DIR/<part>.taken`` created exclusively), waits for the parts it builds on
(:data:`AFTER`: their kernels are then loaded, not compiled twice) and marks it done
(``DIR/<part>.done``), until none is left. :func:`run_shared` runs such a team: this process and
``processes - 1`` others, and ``python -m core.warmup --team N PART ...`` runs one from the
command line (in the background of a caller that needs the kernels later), saying what it
compiles and how long it took (what the mechnode node starts).
Compile messages (:mod:`core.cache`) count the kernels of the whole team (``kernel 3 of ~12``)
in ``DIR/compiled``.
"""
from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

#: part -> the entry kernels it calls (``layer.module.function`` under ``core``), in the order it calls them
PARTS = {
    "state": ("continuous.dynamics.lagrangian_kernel", "continuous.dynamics.input_matrix_kernel",
              "discrete.legendre.legendre", "discrete.legendre.inverse_legendre", "discrete.tracking.feedback"),
    "step": ("discrete.entry.step_at", "discrete.trajectory.solve_each"),  # (del_step: inside both)
    "closed_loop": ("discrete.entry.closed_loop_entry",),
    "hold": ("continuous.dynamics.constraint_kernel", "discrete.inverse.discrete_momenta"),
    "inverse": ("discrete.inverse.del_inverse_dynamics",),
    "linearize": ("discrete.trajectory.linearize_chunk",),
    "lqr": ("control.riccati.lq_riccati",),
    "optimize": ("control.costs.costate_and_gradient", "control.directions.linear_response"),
    "continuous": ("continuous.dynamics.linearize_at", "continuous.dynamics.qdd_at",
                   "continuous.dynamics.continuous_dynamics", "discrete.legendre.legendre_jacobian"),
    "discrete": ("discrete.trajectory.simulate_kernel", "discrete.entry.linearize_step_at"),
    "all": ("discrete.second_order.second_order", "discrete.second_order.contracted_second_order",
            "discrete.entry.contracted_step_at"),
    "stacks": ("continuous.stacked._qdd_stack", "continuous.stacked._linearize_stack", "discrete.entry.step_stack",
               "discrete.trajectory.solve_parallel", "discrete.trajectory.linearize_parallel",
               "discrete.legendre.legendre_many"),
}
#: part -> parts whose kernels it calls inside its own (taken after them when shared, so that
#: their callees are loaded from the cache, not compiled twice)
AFTER = {"closed_loop": ("step",), "optimize": ("step", "linearize", "lqr", "inverse", "closed_loop"),
         "inverse": ("state",), "hold": ("step", "linearize", "inverse"),  # (solve_each, linearize_chunk on a
                                                                            # stack of one; discrete_momenta)
         "discrete": ("step", "linearize", "inverse"), "all": ("continuous", "discrete"),
         "stacks": ("step", "linearize", "continuous")}
#: What a controller needs before it may command (the mechnode node's configure): every part
#: but the continuous and second-order linearizations (which then compile on first use, or in
#: the background).
#: Ordered for two processes: one compiles the step (the longest part), the other the state's
#: kernels and then the linearization, whose callees the step has compiled by then (loaded
#: from the cache, not compiled twice); the step's closed loop (the optimizer's line search, a
#: re-plan) follows the step; the rest goes to whichever is free.
CONTROL_PARTS = ("step", "state", "closed_loop", "linearize", "inverse", "lqr", "hold", "optimize")


def _tiny():
    from core.discrete.midpoint import MidpointVI
    from core.examples import chain
    return MidpointVI(chain(2), 0.01)


def _run(part: str, vi) -> None:
    from core.continuous.equilibrium import holding_inputs, satisfy_constraints
    from core.control.optimal import optimize_trajectory
    from core.control.riccati import tvlqr
    n, nx, nu = vi.nq, vi.nx, vi.nu
    z = np.zeros(n)
    if part == "state":
        vi.system.lagrangian_derivatives(z, z, 2)
        vi.system.input_matrix(z)
        x = vi.discrete_state(z, z)
        vi.continuous_state(x)
        vi.feedback(z, z, x, np.zeros(nu), np.zeros((nu, nx)))
    elif part == "step":
        vi.step(np.zeros(nx), np.zeros(nu))
        vi._solve_knots(np.zeros((2, nx)), np.zeros((1, nu)), 1, 0)
    elif part == "linearize":     # (of knots taken as solved: the solve is the step's part)
        nh, nk = vi.system.model.nh, vi.nk
        knots = (np.zeros((1, n)), np.zeros((1, vi.nd)), np.zeros((1, vi.system.nu)), np.zeros((1, nk)),
                 np.zeros((1, n)), np.zeros((1, nh)), np.zeros((1, nh, n)))
        vi._linearize_knots(knots, False, 1, 0)
    elif part == "hold":
        vi.system.constraint(z, 2)   # (a model without constraints may not get to it below)
        q = satisfy_constraints(vi.system, np.full(n, 0.3))
        x = vi.rest_state(q)
        u = vi.rest_input(q, holding_inputs(vi.system, q)[0])
        vi.linearize(x[None], u[None])      # (a stack of one: the trajectory kernels, as mechnode's hold)
    elif part in ("inverse", "optimize"):
        Q = np.zeros((3, n))
        U, P, _ = vi.inverse_dynamics(Q, np.zeros(vi.nd))
        vi.discrete_momenta(Q, np.zeros(vi.nd))
        X = np.hstack([Q, P, np.zeros((3, vi.nk))])
        if part == "optimize":
            optimize_trajectory(vi, X[0], X, U, np.eye(nx), np.eye(nu), np.eye(nx), method="first_order",
                                max_iterations=1)
    elif part == "closed_loop":
        x = np.zeros(nx)
        vi.closed_loop(x, np.zeros((2, nx)), np.zeros((1, nu)), np.zeros((1, nu, nx)))
    elif part == "lqr":
        A, B = np.tile(np.eye(nx), (2, 1, 1)), np.tile(np.eye(nx, nu), (2, 1, 1))
        tvlqr(A, B, np.eye(nx), np.eye(nu), np.eye(nx))
    elif part in ("continuous", "discrete", "all"):
        vi.warm_up(part=part)
    elif part == "stacks":
        Q = np.zeros((2, n))
        vi.system.qdd(Q, Q)
        vi.system.linearize(Q, Q, residual_limit=None)
        X = vi.discrete_states(Q, Q)
        vi.step(X, np.zeros((2, nu)))
        vi.linearize_trajectory(np.zeros((3, nx)), np.zeros((2, nu)), threads=2)
    else:
        raise ValueError(f"unknown warm-up part {part!r} (parts: {', '.join(PARTS)})")


def run(parts, vi=None) -> None:
    """Run ``parts`` (names of :data:`PARTS`) in this process, in order, on ``vi`` (default: a
    two-link chain). A part whose kernels are singular at its state is compiled all the same."""
    from core.errors import CoreError
    vi = _tiny() if vi is None else vi
    for part in parts:
        try:
            _run(part, vi)
        except (CoreError, ArithmeticError, np.linalg.LinAlgError):
            pass


def kernel(name: str):
    """The dispatcher ``core.<module>.<function>`` named by ``name`` (``module.function``, the
    module dotted: ``discrete.entry.step_at``)."""
    module, function = name.rsplit(".", 1)
    return getattr(importlib.import_module(f"core.{module}"), function)


def pending(parts) -> list:
    """The entry kernels of ``parts`` that numba's cache does not hold yet (their names):
    empty on a warm cache."""
    from core.cache import is_cached
    out = []
    for part in parts:
        for name in PARTS[part]:
            if name not in out and not is_cached(kernel(name)):
                out.append(name)
    return out


# ----------------------------------------------------------------------------- shared work
def _mark(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return True
    except FileExistsError:
        return False


def work(directory: str, parts, vi=None, poll: float = 0.1) -> list:
    """Take and run the parts of ``parts`` that no other process of the team (same
    ``directory``) has taken, each after the parts it builds on (:data:`AFTER`) are done; returns
    the parts this process ran."""
    vi = _tiny() if vi is None else vi
    mine = []
    left = list(parts)
    while left:
        done = {p for p in parts if os.path.exists(os.path.join(directory, f"{p}.done"))}
        ready = [p for p in left if all(d in done or d not in parts for d in AFTER.get(p, ()))]
        took = False
        for part in ready:
            left.remove(part)
            if _mark(os.path.join(directory, f"{part}.taken")):
                try:
                    run([part], vi)
                finally:
                    _mark(os.path.join(directory, f"{part}.done"))
                mine.append(part)
                took = True
                break
        if not took and left:
            time.sleep(poll)
    # the parts the others took: this process returns once they are done (cache written)
    while not all(os.path.exists(os.path.join(directory, f"{p}.done")) for p in parts):
        time.sleep(poll)
    return mine


def start_worker(directory: str | None, parts, tag: str, nice: int = 0, stderr=None) -> subprocess.Popen | None:
    """``python -m core.warmup [--work DIR] PARTS`` (with ``directory``: a team member; its
    compile messages tagged ``tag`` on ``stderr``, default this process's; ``nice``: its
    niceness increment); None if it cannot start."""
    from core.cache import SOURCE_DIR, compile_environment
    env = compile_environment(tag)
    work_args = ["--work", directory] if directory else []

    def lower():
        os.nice(nice)
    try:
        return subprocess.Popen([sys.executable, "-m", "core.warmup", *work_args, *parts],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                                cwd=os.path.dirname(SOURCE_DIR), preexec_fn=lower if nice else None)
    except OSError:
        return None


def run_shared(parts, processes: int = 2, vi=None, stderr=None) -> float:
    """Run ``parts`` shared by this process and ``processes - 1`` others (only the parts with
    kernels missing from the cache need that: on a warm cache everything runs here, loading).
    Returns the seconds it took. The others' compile messages go to ``stderr`` (default: this
    process's)."""
    from core import cache
    t0 = time.perf_counter()
    todo = pending(parts)
    if processes < 2 or not todo:
        run(parts, vi)
        return time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="core_warmup_") as directory:
        cache.expect(len(todo), os.path.join(directory, "compiled"))
        others = [start_worker(directory, parts, f"{i + 1}/{processes}", stderr=stderr)
                  for i in range(1, processes)]
        try:
            work(directory, parts, vi)
        finally:
            for p in others:
                if p is not None:
                    p.wait()
            cache.expect(0)
    run(parts, vi)      # (loaded: nothing compiles any more)
    return time.perf_counter() - t0


def team_main(parts, processes: int) -> int:
    """``python -m core.warmup --team N PART ...``: if the cache lacks kernels of ``parts``, say
    how many and compile them in ``N`` processes (this one and ``N - 1`` others), then say how
    long it took (stderr); silent on a warm cache. Prints the number of missing kernels on stdout
    first. What a caller that may import only core's public API (the mechnode node) starts,
    then waits for. A tag already in ``MECHNODE_COMPILE_TAG`` is kept when ``N`` is 1."""
    from core import cache
    todo = pending(parts)
    print(len(todo), flush=True)        # (stdout: how many were missing, for the caller)
    if not todo:
        return 0
    t0 = time.perf_counter()
    sys.stderr.write(f"core: the numba cache lacks {len(todo)} kernels (first run, or core changed): compiling "
                     f"them in {processes} processes, each named and counted below\n")
    sys.stderr.flush()
    with tempfile.TemporaryDirectory(prefix="core_warmup_") as directory:
        cache.expect(len(todo), os.path.join(directory, "compiled"))
        if processes > 1 or not os.environ.get(cache.TAG_VARIABLE):
            os.environ[cache.TAG_VARIABLE] = f"1/{processes}"
        if cache._reporter is not None:
            cache._reporter.prefix = f"core[{os.environ[cache.TAG_VARIABLE]}]: "
        others = [p for p in (start_worker(directory, parts, f"{i + 1}/{processes}") for i in range(1, processes))
                  if p is not None]
        def stop(*_):       # (at once and quietly: an exception raised inside one of numba's
            for p in others:    # callbacks would print a traceback and be ignored)
                p.terminate()
            sys.stderr.write(f"core[{os.environ.get(cache.TAG_VARIABLE, '')}]: stopped compiling (terminated)\n")
            sys.stderr.flush()
            os._exit(128 + signal.SIGTERM)
        signal.signal(signal.SIGTERM, stop)
        try:
            work(directory, parts)
        except BaseException:           # (ended: SIGTERM, SIGINT) the others end too
            for p in others:
                p.terminate()
            raise
        finally:
            for p in others:
                p.wait()
            cache.expect(0)
    sys.stderr.write(f"core: compiled the {len(todo)} kernels in {time.perf_counter() - t0:.1f} s\n")
    sys.stderr.flush()
    return 0


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    directory = team = None
    if args[:1] == ["--work"] and len(args) >= 2:
        directory, args = args[1], args[2:]
    elif args[:1] == ["--team"] and len(args) >= 2 and args[1].isdigit():
        team, args = int(args[1]), args[2:]
    if not args or any(a not in PARTS for a in args):
        print(f"usage: python -m core.warmup [--work DIR | --team N] PART [PART ...] (parts: {', '.join(PARTS)}; "
              "e.g. python -m core.warmup discrete)", file=sys.stderr)
        return 2
    if team is not None:
        return team_main(args, max(1, team))
    if directory is None:
        run(args)
    else:
        work(directory, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
