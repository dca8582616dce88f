"""Contacts on legged robots, against Pinocchio in one process (interleaved minimum per call):

* the constrained linearization in the tangent space, ``System.linearize`` (accelerations and
  ``A, B`` with the contacts held) against Pinocchio's ``constraintDynamics`` followed by
  ``computeConstraintDynamicsDerivatives`` (``RigidConstraintModel`` per foot,
  ``LOCAL_WORLD_ALIGNED``), on Solo12 (four point feet) and Talos (two flat feet);
* from a standing state to the balance gain (``core.standing`` is not counted;
  ``core.balance_lqr``: the minimal linearization and the CARE) on both.

    .venv/bin/python bench/bench_contacts.py

Needs the test extras (``pin``, ``example-robot-data``). Prints microseconds and ratios; asserts
nothing.
"""
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from contactref import PinocchioContacts, load  # noqa: E402

import core  # noqa: E402

from common import interleaved_min_us  # noqa: E402

CASES = (("solo12", "solo_description/robots/solo12.urdf", "point", np.tile([0.0, 0.8, -1.6], 4)),
         ("talos", "talos_data/robots/talos_reduced.urdf", "frame", None))


def main():
    warnings.simplefilter("ignore", core.errors.ModelWarning)
    print(f"{'robot':8s} {'nv':>3s} {'rows':>4s} {'ours us':>9s} {'pinocchio us':>13s} {'ratio':>6s} "
          f"{'balance_lqr ms':>15s}")
    for name, path, kind, posture in CASES:
        s = load(path, kind)
        q = s.neutral()
        if posture is not None:
            q[7:] = posture
        st = core.standing(s, q, height=0.0)
        rng = np.random.default_rng(0)
        _, Dh = s.constraint(st.q, 1)
        null = np.linalg.svd(Dh)[2][Dh.shape[0]:].T
        v = null @ rng.normal(size=null.shape[1])
        u = st.u + rng.normal(size=s.nu)
        peer = PinocchioContacts(s, path, core.find_feet(s), kind)
        peer.evaluate(st.q, v, u)                   # (builds its contact models at this state)
        times = interleaved_min_us({"ours": lambda s=s, q=st.q, v=v, u=u: s.linearize(q, v, u),
                                    "pinocchio": lambda peer=peer, q=st.q, v=v, u=u: peer.derivatives(q, v, u)})
        core.balance_lqr(s, st.q, st.u)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            core.balance_lqr(s, st.q, st.u)
            best = min(best, time.perf_counter() - t0)
        print(f"{name:8s} {s.nv:3d} {s.model.nh:4d} {times['ours']:9.1f} {times['pinocchio']:13.1f} "
              f"{times['ours'] / times['pinocchio']:6.2f} {1e3 * best:15.1f}")


if __name__ == "__main__":
    main()
