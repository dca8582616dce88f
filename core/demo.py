"""Demo: load a model from YAML and print its exact continuous and discrete linearizations.

    python -m core.demo [MODEL]      (a file, or a packaged model's name: python -m core.demo
                                      arm7.urdf; default double_pendulum.yaml)

A fixed use of ``mechnode-linearize`` (:mod:`core.cli`, which linearizes at any state given on
the command line) at a state chosen for the model, continuous and discrete.

The operating point: the paper's for the default model (Johnson & Murphey 2010, Sec. IV; its
printed q is rounded, 3.5 mm off the constraint, so the constraint check is skipped for it), the
hanging rest state for the marionette, otherwise ``q = 0`` moved onto the holonomic constraints
(Gauss-Newton) with ``dq = 0``. A model that cannot be linearized there exits with status 1 and
the reason, not a traceback.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

#: The default model: packaged with core (core.data.model_file finds it by name).
DEFAULT_MODEL = "double_pendulum.yaml"


def project_onto_constraints(system, q, tol: float = 1e-12, max_iterations: int = 50):
    """``q`` moved onto ``h(q) = 0`` by :func:`core.satisfy_constraints` (Gauss-Newton,
    least-norm steps), or None if it does not get there within ``max_iterations``."""
    from core import satisfy_constraints
    from core.errors import EquilibriumError, SingularMatrixError
    try:
        return satisfy_constraints(system, q, tol=tol, max_iter=max_iterations)
    except (EquilibriumError, SingularMatrixError):
        return None


def operating_point(system, model_path):
    """``(q, dq, u, residual_limit, note)`` for the demo (see the module docstring); ``u`` is the
    continuous input (forces, then kinematic accelerations). Raises ValueError saying why no
    valid point was found."""
    from core.examples import marionette_rest_state
    u = np.zeros(len(system.continuous_input_names))
    from core.data import model_file
    if model_path == DEFAULT_MODEL or os.path.abspath(model_path) == os.path.abspath(model_file(DEFAULT_MODEL)):
        return (np.array([0.5246, 1.0472]), np.array([1.0, -2.00116]), np.array([2.0]), None,
                "the paper's operating point (printed rounded: h = %.2g, check skipped)"
                % system.constraint(np.array([0.5246, 1.0472]))[0])
    if system.name == "marionette":
        return (marionette_rest_state(system), np.zeros(system.nq), u, 1e-6,
                "the marionette's rest state (core.examples.marionette_rest_state)")
    q = project_onto_constraints(system, np.zeros(system.nq))
    if q is None:
        h = system.constraint(np.zeros(system.nq))
        raise ValueError(f"q = 0 violates the holonomic constraints (|h| up to "
                         f"{np.max(np.abs(h)):.3g}) and Gauss-Newton did not reach them from there")
    note = "q = 0" if np.all(q == 0) else "q = 0 moved onto the constraints"
    return q, np.zeros(system.nq), u, 1e-6, note


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default=DEFAULT_MODEL,
                        help="model file or packaged model name (default: %(default)s)")
    parser.add_argument("--dt", type=float, default=0.01, help="variational integrator time step [s]")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    import core
    from core import cli
    system = core.load_system(args.model)
    print(f"model {args.model}: {system}")
    print(f"  q = {system.config_names}, u = {system.continuous_input_names}")
    np.set_printoptions(precision=6, suppress=True, linewidth=120)
    try:
        q, dq, u, limit, note = operating_point(system, args.model)
        print(f"operating point: {note}")
        c = cli.linearize(system, q, dq, u, residual_limit=limit, model=args.model)
        t1 = time.perf_counter()
        print(f"\ncontinuous linearization at q={q}, dq={dq}, u={u}  (x = [q, dq])")
        print("A =\n" + cli.matrix_text(c.A, c.state_names, c.state_names)
              + "\nB =\n" + cli.matrix_text(c.B, c.state_names, c.input_names))
        print("qdd =", system.qdd(q, dq, u), " lambda =", system.constraint_forces(q, dq, u))
        print(f"eigenvalues of A: {np.sort_complex(c.eigenvalues)}; controllability rank "
              f"{c.controllability_rank} of {len(c.state_names)}")

        # discrete input: the forces, then the kinematic variables held where they are
        kin = [system.config_names.index(n) for n in system.kinematic_names]
        ud = np.concatenate([u[:system.nu], q[kin]])
        d = cli.linearize(system, q, dq, ud, discrete=True, dt=args.dt, model=args.model)
        print(f"\nmidpoint variational integrator, dt = {args.dt}: x = {d.state_names}")
        print("x_next =", core.MidpointVI(system, args.dt).step(d.x, ud))
        print("A_d =\n" + cli.matrix_text(d.A, d.state_names, d.state_names)
              + "\nB_d =\n" + cli.matrix_text(d.B, d.state_names, d.input_names))
    except (core.CoreError, ValueError, ArithmeticError) as exc:
        print(f"\ncannot linearize {args.model} at the chosen operating point: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"\nstart-up incl. numba cache load and first linearization: {t1 - t0:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
