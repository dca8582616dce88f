"""Time per operating point: mechnode's compiled Linearizer vs SymPy's Linearizer.linearize.

Systems: the rolling disc of SymPy's ``test_linearize.py`` (Kane's method, one configuration
and three velocity constraints) and the bicycle of SymPy's ``test_kane3.py`` (Kane's method,
Meijaard et al. benchmark geometry, one configuration and three velocity constraints).

For each system the script prints the one-time costs (SymPy model, ``to_linearizer``, mechnode
build per backend, SymPy's first ``linearize`` which includes its symbolic setup) and the median
time per operating point with a fully numeric op_point, for

* SymPy: ``Linearizer.linearize(op_point=..., A_and_B=True)`` (a few points only, it is slow);
* mechnode: ``from_sympy(...).linearize(op_point=..., A_and_B=True)`` with the same dict, and the
  numeric core alone (arrays in, no dict translation).

Plain script, no assertions on timings; run ``python bench/bench_linearizer.py [--quick]``.
"""
from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import sympy as sp
from sympy.physics.mechanics import KanesMethod, Point, ReferenceFrame, RigidBody, dot, dynamicsymbols, inertia, msubs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from core.examples import sympy_rolling_disc  # noqa: E402
from core.general.sympy_bridge import from_sympy  # noqa: E402


# ---------------------------------------------------------------------- systems
def rolling_disc():
    """Rolling disc of SymPy's test_linearize_rolling_disc_kane (core.examples.sympy_rolling_disc);
    returns (KM, random_point)."""
    KM = sympy_rolling_disc()
    q, u = list(KM.q), list(KM.u)
    q2, q6 = q[1], q[5]
    r, m, g = sp.symbols("r m g")

    def random_point(rng):
        values = {r: 0.3, m: 2.0, g: 9.81}
        values.update(zip(q[:5], rng.uniform(-0.5, 0.5, 5), strict=True))
        values[q6] = -0.3 * float(sp.cos(values[q2]))
        values.update(zip(u[:3], rng.uniform(-2.0, 2.0, 3), strict=True))
        return values

    return KM, random_point


def bicycle():
    """Bicycle of SymPy's test_kane3 (Meijaard et al. 2007 benchmark); (KM, random_point)."""
    q1, q2, q4, q5 = dynamicsymbols("q1 q2 q4 q5")
    u1, u2, u3, u4, u5, u6 = dynamicsymbols("u1 u2 u3 u4 u5 u6")
    q1d, q2d, q4d, q5d = dynamicsymbols("q1 q2 q4 q5", 1)
    WFrad, WRrad, htangle, forkoffset = sp.symbols("WFrad WRrad htangle forkoffset")
    forklength, framelength, forkcg1 = sp.symbols("forklength framelength forkcg1")
    forkcg3, framecg1, framecg3, Iwr11 = sp.symbols("forkcg3 framecg1 framecg3 Iwr11")
    Iwr22, Iwf11, Iwf22, Iframe11 = sp.symbols("Iwr22 Iwf11 Iwf22 Iframe11")
    Iframe22, Iframe33, Iframe31, Ifork11 = sp.symbols("Iframe22 Iframe33 Iframe31 Ifork11")
    Ifork22, Ifork33, Ifork31, g = sp.symbols("Ifork22 Ifork33 Ifork31 g")
    mframe, mfork, mwf, mwr = sp.symbols("mframe mfork mwf mwr")
    N = ReferenceFrame("N")
    Y = N.orientnew("Y", "Axis", [q1, N.z])
    R = Y.orientnew("R", "Axis", [q2, Y.x])
    Frame = R.orientnew("Frame", "Axis", [q4 + htangle, R.y])
    WR = ReferenceFrame("WR")
    TempFrame = Frame.orientnew("TempFrame", "Axis", [-htangle, Frame.y])
    Fork = Frame.orientnew("Fork", "Axis", [q5, Frame.x])
    TempFork = Fork.orientnew("TempFork", "Axis", [-htangle, Fork.y])
    WF = ReferenceFrame("WF")
    WR_cont = Point("WR_cont")
    WR_mc = WR_cont.locatenew("WR_mc", WRrad * R.z)
    Steer = WR_mc.locatenew("Steer", framelength * Frame.z)
    Frame_mc = WR_mc.locatenew("Frame_mc", -framecg1 * Frame.x + framecg3 * Frame.z)
    Fork_mc = Steer.locatenew("Fork_mc", -forkcg1 * Fork.x + forkcg3 * Fork.z)
    WF_mc = Steer.locatenew("WF_mc", forklength * Fork.x + forkoffset * Fork.z)
    WF_cont = WF_mc.locatenew("WF_cont", WFrad * (dot(Fork.y, Y.z) * Fork.y - Y.z).normalize())
    Y.set_ang_vel(N, u1 * Y.z)
    R.set_ang_vel(Y, u2 * R.x)
    WR.set_ang_vel(Frame, u3 * Frame.y)
    Frame.set_ang_vel(R, u4 * Frame.y)
    Fork.set_ang_vel(Frame, u5 * Fork.x)
    WF.set_ang_vel(Fork, u6 * Fork.y)
    WR_cont.set_vel(N, 0)
    WR_mc.v2pt_theory(WR_cont, N, WR)
    Steer.v2pt_theory(WR_mc, N, Frame)
    Frame_mc.v2pt_theory(WR_mc, N, Frame)
    Fork_mc.v2pt_theory(Steer, N, Fork)
    WF_mc.v2pt_theory(Steer, N, Fork)
    WF_cont.v2pt_theory(WF_mc, N, WF)
    bodies = [
        RigidBody("BodyFrame", Frame_mc, Frame, mframe,
                  (inertia(TempFrame, Iframe11, Iframe22, Iframe33, 0, 0, Iframe31), Frame_mc)),
        RigidBody("BodyFork", Fork_mc, Fork, mfork,
                  (inertia(TempFork, Ifork11, Ifork22, Ifork33, 0, 0, Ifork31), Fork_mc)),
        RigidBody("BodyWR", WR_mc, WR, mwr, (inertia(Frame, Iwr11, Iwr22, Iwr11), WR_mc)),
        RigidBody("BodyWF", WF_mc, WF, mwf, (inertia(Fork, Iwf11, Iwf22, Iwf11), WF_mc)),
    ]
    loads = [(Frame_mc, -mframe * g * Y.z), (Fork_mc, -mfork * g * Y.z),
             (WF_mc, -mwf * g * Y.z), (WR_mc, -mwr * g * Y.z)]
    KM = KanesMethod(N, q_ind=[q1, q2, q5], q_dependent=[q4],
                     configuration_constraints=[WF_cont.pos_from(WR_cont) & Y.z],
                     u_ind=[u2, u3, u5], u_dependent=[u1, u4, u6],
                     velocity_constraints=[WF_cont.vel(N) & Y.x, WF_cont.vel(N) & Y.y,
                                           WF_cont.vel(N) & Y.z],
                     kd_eqs=[q1d - u1, q2d - u2, q4d - u4, q5d - u5], constraint_solver="CRAMER")
    KM.kanes_equations(bodies, loads)
    values = dict(zip(
        [WFrad, WRrad, htangle, forkoffset, forklength, framelength, forkcg1, forkcg3, framecg1,
         framecg3, Iwr11, Iwr22, Iwf11, Iwf22, Ifork11, Ifork22, Ifork33, Ifork31, Iframe11,
         Iframe22, Iframe33, Iframe31, mfork, mframe, mwf, mwr, g],
        _benchmark_bicycle_values(), strict=True))

    def random_point(rng):
        # Upright straight running at speed v with q4 = 0 satisfies the configuration constraint
        # for this geometry (as in test_kane3); small random lean/steer rates enter through u_ind.
        v = rng.uniform(1.0, 6.0)
        point = dict(values)
        point.update({q1: rng.uniform(-1, 1), q2: 0.0, q4: 0.0, q5: 0.0,
                      u2: 0.0, u3: v / 0.3, u5: 0.0, u1: 0.0, u4: 0.0, u6: v / 0.35})
        return point

    return KM, random_point


def _benchmark_bicycle_values():
    """Parameter values of test_kane3 (Meijaard et al. benchmark bicycle), same order as used."""
    pi = np.pi
    rad_rear, rad_front, hta, trail, wb = 0.3, 0.35, pi / 2 - pi / 10, 0.08, 1.02
    rake = -(trail * np.sin(hta) - rad_front * np.cos(hta))
    frame_cg_x, frame_cg_z, fork_cg_x, fork_cg_z = 0.3, 0.9, 0.9, 0.7
    frame_length = wb * np.sin(hta) - (rake - (rad_front - rad_rear) * np.cos(hta))
    frame_cg_norm = (frame_cg_z - rad_rear - frame_cg_x / np.sin(hta) * np.cos(hta)) * np.sin(hta)
    frame_cg_par = (frame_cg_x / np.sin(hta) + (frame_cg_z - rad_rear - frame_cg_x / np.sin(hta)
                                                * np.cos(hta)) * np.cos(hta))
    tempa, tempb = fork_cg_z - rad_front, wb - fork_cg_x
    tempc = np.sqrt(tempa**2 + tempb**2)
    fork_l = wb * np.cos(hta) - (rad_front - rad_rear) * np.sin(hta)
    fork_cg_norm = rake + tempc * np.sin(pi / 2 - hta - np.arccos(tempa / tempc))
    fork_cg_par = tempc * np.cos((pi / 2 - hta) - np.arccos(tempa / tempc)) - fork_l
    return [rad_front, rad_rear, hta, rake, fork_l, frame_length, fork_cg_par, fork_cg_norm,
            frame_cg_norm, frame_cg_par, 0.0603, 0.12, 0.1405, 0.28, 0.05892, 0.06, 0.00708,
            0.00756, 9.2, 11, 2.8, -2.4, 4, 85, 3, 2, 9.81]


# ---------------------------------------------------------------------- timing helpers
def median_us(function, points, repeat):
    times = []
    for point in points:
        for _ in range(repeat):
            started = time.perf_counter()
            function(point)
            times.append(time.perf_counter() - started)
    return 1e6 * statistics.median(times)


def timed(function):
    started = time.perf_counter()
    result = function()
    return result, time.perf_counter() - started


def dependent_speeds(sympy_linearizer, point):
    """Solve the velocity constraints (linear in u) for the dependent speeds at ``point``."""
    f_v = msubs(sympy_linearizer.f_v, {k: v for k, v in point.items()
                                       if k not in set(sympy_linearizer.u_d)})
    u_d = list(sympy_linearizer.u_d)
    jac_d = np.array(f_v.jacobian(u_d).xreplace({x: 0 for x in u_d}), dtype=float)
    rest = np.array(f_v.xreplace({x: 0 for x in u_d}), dtype=float).ravel()
    point.update(zip(u_d, np.linalg.solve(jac_d, -rest), strict=True))
    return point


def report(label, seconds, note=""):
    """One aligned line: label, then the time in s, ms or us."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale or unit == "us":
            break
    print(f"{label:<42}{seconds / scale:10.1f} {unit:<2}{note}")


def bench_system(name, builder, n_points, sympy_points, repeat, backends, linear_solver="LU",
                 check=None):
    print(f"\n=== {name}")
    (KM, random_point), seconds = timed(builder)
    report("SymPy model (kanes_equations)", seconds)
    sympy_lin, seconds = timed(lambda: KM.to_linearizer(linear_solver=linear_solver))
    report("SymPy to_linearizer", seconds)
    rng = np.random.default_rng(1)
    raw_points = [dependent_speeds(sympy_lin, random_point(rng)) for _ in range(n_points)]
    ours = {}
    for backend in backends:
        ours[backend], seconds = timed(functools.partial(from_sympy, KM, backend=backend))
        report(f"mechnode build, backend={backend!r}", seconds)
    reference = ours[backends[0]]
    points = [reference.complete_op_point(p) for p in raw_points]  # q', u' solved
    per_point = {}
    for backend, lin in ours.items():
        per_point[backend] = median_us(lambda p, lin=lin: lin.linearize(op_point=p, A_and_B=True),
                                       points, repeat)
        arrays = [lin._numeric_point(p) for p in points]
        t_core = median_us(lambda a, lin=lin: lin.linearizer.linearize(a, A_and_B=True), arrays, repeat)
        t_solve = median_us(lambda p, lin=lin: lin.linearize(op_point=p, A_and_B=True), raw_points,
                            repeat)
        report(f"mechnode per point, backend={backend!r}", per_point[backend] * 1e-6,
               f"   (arrays in: {t_core:.0f} us; q', u' solved too: {t_solve:.0f} us)")
    if check:
        check(reference, random_point)
    (A_sym, _), seconds = timed(lambda: sympy_lin.linearize(op_point=points[0], A_and_B=True))
    report("SymPy first linearize (incl. its setup)", seconds,
           f"   (linear_solver={linear_solver!r})")
    sympy_set = points[1:1 + sympy_points]
    t_sympy = median_us(lambda p: sympy_lin.linearize(op_point=p, A_and_B=True), sympy_set, 1)
    report(f"SymPy per point (median of {len(sympy_set)})", t_sympy * 1e-6)
    A_ours, _ = reference.linearize(op_point=points[0], A_and_B=True)
    A_sym = np.array(A_sym, dtype=float)
    error = np.abs(A_ours - A_sym).max() / max(1.0, np.abs(A_sym).max())
    print(f"{'max |A_mechnode - A_sympy| / max |A|':<42}{error:10.1e}")
    speed_up = t_sympy / min(per_point.values())
    print(f"{'speed-up per point (fastest backend)':<42}{speed_up:10,.0f}x")


def check_bicycle_benchmark(lin, random_point):
    """Lean/steer block against the Meijaard et al. values used in SymPy's test_kane3."""
    q1, q2, q4, q5 = dynamicsymbols("q1 q2 q4 q5")
    u = dynamicsymbols("u1 u2 u3 u4 u5 u6")
    worst = 0.0
    for v in range(6):
        point = random_point(np.random.default_rng(v))  # parameters; q, u, u' set below
        point.update({q1: 0, q2: 0, q4: 0, q5: 0, **{x.diff(): 0 for x in u}})
        point.update(zip(u, [0, 0, v / 0.3, 0, 0, v / 0.35], strict=True))
        A, _ = lin.linearize(op_point=point, A_and_B=True)
        block = A[np.ix_([1, 2, 3, 5], [1, 2, 3, 5])]  # lean, steer, lean rate, steer rate
        reference = np.array([
            [0, 0, 1.0, 0], [0, 0, 0, 1.0],
            [9.48977444677355, -0.891197738059089 * v**2 - 0.571523173729245,
             -0.105522449805691 * v, -0.330515398992311 * v],
            [11.7194768719633, -1.97171508499972 * v**2 + 30.9087533932407,
             3.67680523332152 * v, -3.08486552743311 * v]])
        worst = max(worst, np.abs(block - reference).max())
    print(f"{'lean/steer A vs Meijaard benchmark, v=0..5':<42}{worst:10.1e}   (max abs error)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="rolling disc only, python backend")
    args = parser.parse_args()
    backends = ("python",) if args.quick else ("python", "numba")
    bench_system("rolling disc (SymPy test_linearize)", rolling_disc, n_points=5,
                 sympy_points=5, repeat=200, backends=backends)
    if not args.quick:
        # SymPy's test_kane3 linearizes the bicycle with linear_solver="CRAMER"; the default
        # "LU" takes minutes too and returns NaN at upright points (symbolic pivots vanish).
        bench_system("bicycle (SymPy test_kane3)", bicycle, n_points=4, sympy_points=2,
                     repeat=50, backends=backends, linear_solver="CRAMER",
                     check=check_bicycle_benchmark)


if __name__ == "__main__":
    main()
