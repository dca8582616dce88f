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
4. A sway of the base over the feet, ±2 cm sideways at 0.5 Hz (``core.body_motion``), tracked
   with the time-varying gains along it (``core.balance_schedule``) on the nonlinear dynamics
   (``core.control.body_motion.flow``), the base pushed by 5 cm/s at the start.

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
from core.control.body_motion import flow  # noqa: E402

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


@dataclass
class Sway:
    """The sway tracked on the nonlinear dynamics: times, the base's reference and actual
    positions (m) and the torques."""
    t: np.ndarray
    reference: np.ndarray
    base: np.ndarray
    u: np.ndarray


def sway_tracking(duration: float = 2.0, dt: float = 0.01, amplitude: float = 0.02, push: float = 0.05) -> Sway:
    """The sway of the module docstring: the reference, the schedule, the closed loop."""
    system, st = stand()
    n = system.nv
    t = dt * np.arange(int(round(duration / dt)) + 1)
    w = np.pi                                                   # 0.5 Hz
    zero = np.zeros_like(t)
    path = (np.c_[zero, amplitude * np.sin(w * t), zero], np.c_[zero, amplitude * w * np.cos(w * t), zero],
            np.c_[zero, -amplitude * w * w * np.sin(w * t), zero])
    motion = core.body_motion(system, st.q, t, *path)
    schedule = core.balance_schedule(system, motion, Q=np.diag(np.r_[100.0 * np.ones(n), np.ones(n)]),
                                     R=0.1 * np.eye(system.nu))
    q, v = motion.q[0].copy(), motion.v[0].copy()
    kick = np.array([0.0, push, 0.0, 0.0, 0.0, 0.0])
    Dh = system.constraint(q, 1, anchors=motion.anchors)[1]
    v[:6] += kick
    v[6:] -= np.linalg.lstsq(Dh[:, 6:], Dh[:, :6] @ kick, rcond=None)[0]
    base, torques = [q[:3].copy()], []
    for k in range(t.size - 1):
        u = motion.u[k] - schedule.K[k] @ np.r_[system.difference(motion.q[k], q), v - motion.v[k]]
        q, v = flow(system, q, v, u, dt, 5, motion.anchors)
        base.append(q[:3].copy())
        torques.append(u)
    torques.append(torques[-1])
    return Sway(t, motion.q[:, :3], np.array(base), np.array(torques))


def plot(push: Push, sway: Sway, path: str) -> list | None:
    """The recovery and the sway as a figure at ``path``; the axes' labels (None, and what to
    install said, without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'mechnode[plot]')")
        return None
    fig, axes = plt.subplots(2, 2, sharex="col", figsize=(11, 6))
    for i, name in enumerate(("x", "y", "z")):
        axes[0, 0].plot(push.t, 1e3 * push.x[:, i], label=f"base {name}")
    axes[0, 0].set_ylabel("base displacement (mm)")
    axes[0, 0].set_title(f"a {PUSH} m/s lateral push (linearized)")
    axes[0, 0].legend()
    axes[1, 0].plot(push.t, push.u)
    axes[1, 0].set_ylabel("joint torques (N m)")
    axes[0, 1].plot(sway.t, 1e3 * sway.reference[:, 1], "k--", label="reference")
    axes[0, 1].plot(sway.t, 1e3 * sway.base[:, 1], label="base y")
    axes[0, 1].set_ylabel("base y (mm)")
    axes[0, 1].set_title("a ±2 cm sway, time-varying gains (nonlinear)")
    axes[0, 1].legend()
    axes[1, 1].plot(sway.t, 1e3 * np.linalg.norm(sway.base - sway.reference, axis=1))
    axes[1, 1].set_ylabel("base tracking error (mm)")
    for ax in axes[1]:
        ax.set_xlabel("t (s)")
    fig.suptitle("Solo12 on four feet, contact-consistent LQR")
    fig.tight_layout()
    labels = [ax.get_ylabel() for ax in axes.ravel()]
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return labels


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
    sway = sway_tracking()
    error = np.linalg.norm(sway.base - sway.reference, axis=1)
    print(f"sway ±2 cm at 0.5 Hz, pushed 5 cm/s: largest base error {1e3 * error.max():.2f} mm, "
          f"{1e3 * error[-1]:.3f} mm at {sway.t[-1]:.1f} s, largest torque {np.abs(sway.u).max():.3f} N m")
    if args.plot and plot(push, sway, args.plot):
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
