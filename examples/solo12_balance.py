"""Solo12 standing on its four feet: the standing equilibrium, its contact-consistent LQR gain,
and the recovery from a lateral push, simulated with the linearized closed loop.

1. ``example-robot-data``'s Solo12 on a quaternion floating base, a point contact on each foot
   (``core.find_feet``), crouched (hip 0.8 rad, knee -1.6 rad) and put on the ground
   (``core.standing``: base height, holding torques, contact forces).
2. The balance gain (``core.balance_lqr``): LQR on the independent coordinates of the robot held
   by its feet, ``Q = diag(100 on δ, 1 on v)``, ``R = 0.1 I``, mapped back to the full tangent
   state ``[q ⊖ q̄, v]``.
3. A push: the base's lateral velocity jumps by 0.3 m/s, the legs' joints moving so that the feet
   stay where they are; the closed loop ``ẋ_i = (A_i - B_i K_i) x_i`` is
   integrated exactly (matrix exponential) for 2 s.

Run ``python examples/solo12_balance.py [--plot FILE.png]`` (needs the test extras for the robot
file; ``--plot`` needs matplotlib, the ``plot`` extra: ``pip install 'mechnode[plot]'``); the
functions are importable (``tests/test_examples.py`` runs them).
"""
from __future__ import annotations

import argparse
import glob
import os
import site
import sys
from dataclasses import dataclass

import numpy as np
import scipy.linalg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import core  # noqa: E402

CROUCH = np.tile([0.0, 0.8, -1.6], 4)       # (hip abduction, hip flexion, knee) per leg
PUSH = 0.3                                    # m/s, lateral


def solo12_path() -> str:
    """Solo12's URDF in the ``example-robot-data`` wheel."""
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        found = glob.glob(os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots",
                                       "solo_description", "robots", "solo12.urdf"))
        if found:
            return found[0]
    raise FileNotFoundError("solo12.urdf: install example-robot-data (pip install example-robot-data)")


def stand():
    """``(system, standing)``: Solo12 on its four point feet, crouched, on the ground."""
    system = core.load_urdf(solo12_path(), floating_base="quaternion")
    for foot in core.find_feet(system):
        system.add_contact(foot, "point")
    q = system.neutral()
    q[7:] = CROUCH
    return system, core.standing(system, q, height=0.0)


@dataclass
class Push:
    """The push response: times, the full tangent state ``[δ, v]`` and the torques."""
    t: np.ndarray
    x: np.ndarray
    u: np.ndarray
    gain: object


def push_response(duration: float = 2.0, dt: float = 0.01) -> Push:
    """The linearized closed loop after a lateral push (the module docstring)."""
    system, st = stand()
    n = system.nv
    gain = core.balance_lqr(system, st.q, st.u, Q=np.diag(np.r_[100.0 * np.ones(n), np.ones(n)]),
                            R=0.1 * np.eye(system.nu))
    base = np.array([0.0, PUSH, 0.0, 0.0, 0.0, 0.0])            # base vy (in the base frame)
    Dh = system.constraint(st.q, 1)[1]
    x0 = np.zeros(2 * n)
    x0[n:n + 6] = base                                          # the legs move so that the feet stay
    x0[n + 6:] = -np.linalg.lstsq(Dh[:, 6:], Dh[:, :6] @ base, rcond=None)[0]
    xi0 = np.linalg.lstsq(gain.T, x0, rcond=None)[0]
    step = scipy.linalg.expm((gain.A - gain.B @ gain.K_minimal) * dt)
    t = dt * np.arange(int(round(duration / dt)) + 1)
    xi = np.empty((t.size, xi0.size))
    xi[0] = xi0
    for k in range(1, t.size):
        xi[k] = step @ xi[k - 1]
    x = xi @ gain.T.T
    return Push(t, x, st.u - x @ gain.K.T, gain)


def plot(push: Push, path: str) -> bool:
    """The recovery as a figure at ``path``: the base's displacement and the torques."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'mechnode[plot]')")
        return False
    fig, (ax0, ax1) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    for i, name in enumerate(("x", "y", "z")):
        ax0.plot(push.t, 1e3 * push.x[:, i], label=f"base {name}")
    ax0.set_ylabel("base displacement (mm)")
    ax0.legend()
    ax1.plot(push.t, push.u)
    ax1.set_xlabel("t (s)")
    ax1.set_ylabel("joint torques (N m)")
    fig.suptitle(f"Solo12 on four feet: a {PUSH} m/s lateral push, contact-consistent LQR")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", metavar="FILE.png", help="write the recovery as a figure")
    args = parser.parse_args(argv)
    system, st = stand()
    print(f"standing: base height {st.q[2]:.4f} m, vertical forces {np.round(st.wrenches[:, 2], 3).tolist()} N "
          f"(weight {st.wrenches[:, 2].sum():.3f} N), holding torques |u| <= {np.abs(st.u).max():.3f} N m")
    push = push_response()
    lateral = np.abs(push.x[:, 1])
    back = push.t[np.flatnonzero(lateral > 1e-3)[-1] + 1] if np.any(lateral > 1e-3) else 0.0
    print(f"balance gain: K {push.gain.K.shape}, slowest closed-loop eigenvalue "
          f"{push.gain.eigenvalues.real.max():.3f} 1/s")
    print(f"push of {PUSH} m/s: largest lateral excursion {1e3 * lateral.max():.1f} mm, back within 1 mm after "
          f"{back:.2f} s, largest torque {np.abs(push.u).max():.3f} N m")
    if args.plot and plot(push, args.plot):
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
