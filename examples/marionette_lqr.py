"""LQR stabilization of a marionette (Johnson, Schultz & Murphey, Sec. VIII-B; Figs. 6 and 7).

The marionette-like model of ``core/data/marionette.yaml``: 40 configuration variables, 22 dynamic
(a floating torso, head, arms, legs) and 18 kinematic (for each of the six strings the
controller's x and y and the string length), six holonomic distance constraints (the strings).
Under the midpoint variational integrator the state ``x = [q (40), p (22), v (18)]`` has 80
entries and the input ``u = [next values of the 18 kinematic variables]`` 18.

1. Reference: from rest at a static equilibrium (:func:`rest_state`: elbows, hips and knees
   bent as in the authors' script, string lengths fitted, then the equilibrium), the
   string lengths of the arms and legs follow ``rest +/- 0.1 sin(0.6 pi t)`` (signs: left leg -,
   right leg +, left arm +, right arm -, as in the authors' script), every other string input
   stays at rest; simulated open-loop with the integrator for 10 s (dt = 0.01), so the reference
   is feasible.
2. First-order linearization along the whole reference (Sec. IV and VI, parallel over steps)
   and the time-varying LQR with ``Q = diag(100 on the 40 configurations, 1 on the 40 other
   states)``, ``R = I``, terminal weight ``Q``.
3. A 0.1 rad perturbation of the torso's orientation about the vertical axis (``torso_psi``;
   the other dynamic variables are then moved by a minimum-norm correction so that the strings
   are satisfied again, ``h(q) = 0``), simulated with the feedback (Eq. 37) and without it.

Run ``python examples/marionette_lqr.py [--quick] [--plot DIR]`` (``--plot`` needs matplotlib, the
``plot`` extra: ``pip install 'mechnode[plot]'``); the functions are importable
(``tests/test_examples.py`` runs a shorter horizon).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import core  # noqa: E402
from core.examples import MARIONETTE_POSE as POSE  # noqa: E402,F401
from core.examples import marionette  # noqa: E402
from core.examples import marionette_rest_state as rest_state  # noqa: E402

# the strings moved by the reference and the sign of their 0.1 sin(0.6 pi t) offset
MOVING_STRINGS = {"left_knee_length": -1.0, "right_knee_length": 1.0,
                  "left_hand_length": 1.0, "right_hand_length": -1.0}
PERTURBED = "torso_psi"   # rotation of the torso about the vertical (z) axis


@dataclass
class MarionetteReference:
    vi: object              # core.MidpointVI
    system: object          # state-form view for core.control
    dt: float
    x: np.ndarray           # (N+1, 80) reference states
    u: np.ndarray           # (N, 18) reference inputs (next kinematic values)
    seconds_simulate: float

    @property
    def N(self) -> int:
        return self.u.shape[0]

    @property
    def t(self) -> np.ndarray:
        return self.dt * np.arange(self.N + 1)


def reference(duration: float = 10.0, dt: float = 0.01, amplitude: float = 0.1,
              omega: float = 0.6 * np.pi, moving=None) -> MarionetteReference:
    """Simulate the reference from rest: string inputs ``rest + sign * amplitude sin(omega t)``
    for the strings in ``moving`` (default :data:`MOVING_STRINGS`)."""
    moving = MOVING_STRINGS if moving is None else moving
    system = marionette()
    vi = core.MidpointVI(system, dt)
    q0 = rest_state(system)
    N = int(round(duration / dt))
    names = system.config_names
    kin = vi.kinematic_index
    rho0 = q0[kin]
    t_next = dt * np.arange(1, N + 1)          # rho_k+1 is the value at t_k+1
    U = np.tile(rho0, (N, 1))
    kin_names = [names[i] for i in kin]
    for name, sign in moving.items():
        U[:, kin_names.index(name)] += sign * amplitude * np.sin(omega * t_next)
    t0 = time.perf_counter()
    Q, P, _ = vi.simulate(q0, np.zeros(vi.nd), U)
    seconds = time.perf_counter() - t0
    V = np.zeros((N + 1, vi.nk))               # v_k = (rho_k - rho_k-1) / dt, v_0 = 0 (rest)
    V[1:] = (Q[1:, kin] - Q[:-1, kin]) / dt
    X = np.hstack([Q, P, V])
    return MarionetteReference(vi, vi, dt, X, U, seconds)


def lqr_weights(vi, config_weight: float = 100.0, other_weight: float = 1.0):
    """``Q = diag(100 on every configuration variable, 1 elsewhere)``, ``R = I``."""
    Q = np.diag([config_weight] * vi.nq + [other_weight] * (vi.nd + vi.nk))
    return Q, np.eye(vi.nu)


def perturbed_state(ref: MarionetteReference, variable: str = PERTURBED, delta: float = 0.1,
                    tol: float = 1e-12, max_iterations: int = 20) -> np.ndarray:
    """``x_ref[0]`` with ``variable`` moved by ``delta`` and the other dynamic variables moved
    by the minimum-norm correction that satisfies the constraints again (Gauss-Newton on
    ``h(q) = 0``); the kinematic variables and the momenta keep their reference values."""
    vi = ref.vi
    system = vi.system
    names = system.config_names
    x = ref.x[0].copy()
    q = x[:vi.nq].copy()
    i = names.index(variable)
    q[i] += delta
    free = np.array([j for j in vi.dynamic_index if j != i])
    for _ in range(max_iterations):
        h, Dh = system.constraint(q, 1)
        if np.max(np.abs(h)) < tol:
            break
        q[free] -= np.linalg.lstsq(Dh[:, free], h, rcond=None)[0]
    else:
        raise RuntimeError(f"could not restore h(q) = 0 after perturbing {variable}: "
                           f"|h| = {np.max(np.abs(h)):.2e}")
    x[:vi.nq] = q
    return x


@dataclass
class MarionetteRun:
    ref: MarionetteReference
    K: np.ndarray
    x0: np.ndarray
    x_closed: np.ndarray
    x_open: np.ndarray
    error_closed: np.ndarray    # ||q_dyn - q_dyn,ref|| per step (dynamic configuration)
    error_open: np.ndarray
    seconds_linearize: float
    seconds_riccati: float
    seconds_closed: float
    seconds_open: float


def config_error(vi, x, x_ref) -> np.ndarray:
    """Norm of the error of the dynamic configuration variables at every step."""
    d = vi.dynamic_index
    return np.linalg.norm(x[:, d] - x_ref[:, d], axis=1)


def stabilize(ref: MarionetteReference, delta: float = 0.1, variable: str = PERTURBED,
              config_weight: float = 100.0) -> MarionetteRun:
    """Linearize along the reference, solve the TV-LQR, simulate closed and open loop from the
    perturbed initial state."""
    vi = ref.vi
    Q, R = lqr_weights(vi, config_weight)
    t0 = time.perf_counter()
    A, B = vi.linearize_trajectory(ref.x, ref.u)
    t1 = time.perf_counter()
    K, _ = core.tvlqr(A, B, Q, R, Q)
    t2 = time.perf_counter()
    x0 = perturbed_state(ref, variable, delta)
    x_closed, _ = core.simulate_closed_loop(ref.system.step, x0, ref.x, ref.u, K)
    t3 = time.perf_counter()
    x_open = core.simulate_open_loop(ref.system.step, x0, ref.u)
    t4 = time.perf_counter()
    return MarionetteRun(ref, K, x0, x_closed, x_open, config_error(vi, x_closed, ref.x),
                         config_error(vi, x_open, ref.x), t1 - t0, t2 - t1, t3 - t2, t4 - t3)


# ----------------------------------------------------------------------------------- plots
def plot(run: MarionetteRun, directory: str, variable: str = PERTURBED) -> list:
    """Figs. 6 and 7 as PNG files in ``directory`` (nothing without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping the plots (pip install 'mechnode[plot]')")
        return []
    os.makedirs(directory, exist_ok=True)
    t = run.ref.t
    paths = []
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(t, run.error_closed, "b", label="closed loop")
    ax.plot(t, run.error_open, "r", label="open loop")
    ax.set(xlabel="t [s]", ylabel="||q_dyn - q_dyn,ref||",
           title="Marionette: norm of the configuration error (cf. Fig. 6)")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    paths.append(os.path.join(directory, "marionette_error.png"))
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    i = run.ref.vi.system.config_names.index(variable)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(t, run.ref.x[:, i], "k", lw=2, label="reference")
    ax.plot(t, run.x_closed[:, i], "b", label="closed loop")
    ax.plot(t, run.x_open[:, i], "r", label="open loop")
    ax.set(xlabel="t [s]", ylabel=f"{variable} [rad]",
           title="Marionette: torso orientation about the vertical (cf. Fig. 7)")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    paths.append(os.path.join(directory, "marionette_torso.png"))
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


# ------------------------------------------------------------------------------------ main
def run(duration: float = 10.0, dt: float = 0.01, delta: float = 0.1,
        plot_dir: str | None = None) -> MarionetteRun:
    ref = reference(duration, dt)
    vi = ref.vi
    print(f"Marionette (Sec. VIII-B): {vi.nq} configuration variables ({vi.nd} dynamic, "
          f"{vi.nk} kinematic), {vi.system.model.nh} constraints; nx = {vi.nx}, nu = {vi.nu}; "
          f"{duration:g} s at dt = {dt:g} ({ref.N} steps)")
    print(f"  reference simulation {ref.seconds_simulate:.3f} s "
          f"({1e3 * ref.seconds_simulate / ref.N:.3f} ms/step)")
    result = stabilize(ref, delta)
    N = ref.N
    print(f"  linearization of the trajectory (first call) {result.seconds_linearize:.3f} s "
          f"({1e3 * result.seconds_linearize / N:.3f} ms/step), TV-LQR Riccati pass "
          f"{result.seconds_riccati:.3f} s ({1e3 * result.seconds_riccati / N:.3f} ms/step)")
    print(f"  closed-loop simulation {result.seconds_closed:.3f} s, open-loop "
          f"{result.seconds_open:.3f} s")
    ec, eo = result.error_closed, result.error_open
    tail = slice(3 * N // 4, None)
    print(f"  perturbation {delta:g} rad of {PERTURBED}; |q_dyn - q_dyn,ref| "
          "(initial / max / final / mean of last quarter):")
    print(f"    closed loop {ec[0]:.4f} / {ec.max():.4f} / {ec[-1]:.3e} / {ec[tail].mean():.3e}")
    print(f"    open loop   {eo[0]:.4f} / {eo.max():.4f} / {eo[-1]:.3e} / {eo[tail].mean():.3e}")
    i = vi.system.config_names.index(PERTURBED)
    print(f"  {PERTURBED} error at the end: closed loop "
          f"{result.x_closed[-1, i] - ref.x[-1, i]:+.3e}, open loop "
          f"{result.x_open[-1, i] - ref.x[-1, i]:+.3e} rad")
    if plot_dir:
        for path in plot(result, plot_dir):
            print(f"  saved {path}")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="reduced form: 3 s at dt = 0.02")
    parser.add_argument("--duration", type=float, default=None, help="seconds (default 10)")
    parser.add_argument("--dt", type=float, default=None, help="time step (default 0.01)")
    parser.add_argument("--delta", type=float, default=0.1, help="torso perturbation [rad]")
    parser.add_argument("--plot", metavar="DIR", default=None,
                        help="save PNG figures in DIR (needs matplotlib: the mechnode[plot] extra)")
    args = parser.parse_args(argv)
    duration = args.duration or (3.0 if args.quick else 10.0)
    dt = args.dt or (0.02 if args.quick else 0.01)
    run(duration, dt, args.delta, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
