"""Every URDF of ``example-robot-data`` as a user loads it: does ``core.load_urdf`` take it with
the default options, with how many warnings, and how far are ``qdd``, ``A``, ``B`` from
Pinocchio's at random states (fixed base, mimic joints independent, inertias as written; with
``--floating``: the quaternion base against Pinocchio's free-flyer). The comparison is
``tests/urdfref.py``'s :func:`compare_file`, the one the tests assert on; this prints its table.

    .venv/bin/python bench/robot_files.py [--floating] [--markdown]

Needs the test extras (``pin``, ``example-robot-data``). Prints figures; asserts nothing.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from urdfref import compare_file, robot_files  # noqa: E402


def main():
    floating, markdown = "--floating" in sys.argv, "--markdown" in sys.argv
    t0 = time.perf_counter()
    rows = []
    for relative in robot_files():
        r = compare_file(relative, free_flyer=floating)
        if r["pinocchio"] is not True:
            status = "both refuse" if not r["loaded"] else "Pinocchio refuses"
        elif "error" in r:
            status = "not floatable (root 'world')" if floating else "REFUSED: " + r["error"][:60]
        elif r["worst"] is None:
            status = "loaded (no coordinates)"
        else:
            status = "compared" + (" (armature 0.01)" if r["armature"] else "")
        worst = "" if r["worst"] is None else f"{r['worst']:.1e}"
        bound = "" if r["tolerance"] is None else f"{r['tolerance']:.1e}"
        n = r.get("nq_independent") if r.get("nq_independent") is not None else r["nq"]
        rows.append((relative, "" if n is None else str(n), str(len(r["warnings"])), status, worst, bound))
    head = ("file", "n", "warnings", "outcome", "worst rel. error", "bound")
    if markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in [head] + rows:
            print(f"{row[0]:62s} {row[1]:>4s} {row[2]:>8s}  {row[3]:32s} {row[4]:>9s} {row[5]:>9s}")
    loaded = sum(1 for r in rows if not r[3].startswith(("REFUSED", "both", "not floatable")))
    compared = [r for r in rows if r[4]]
    print(f"\n{len(rows)} files: {loaded} loaded, {sum(1 for r in rows if r[2] != '0')} with warnings, "
          f"{len(compared)} compared, worst {max(float(r[4]) for r in compared):.1e}; "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
