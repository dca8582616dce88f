"""``mechnode-linearize``: the exact linearization of a model at one operating point.

    mechnode-linearize MODEL [--q Q] [--dq DQ] [--u U] [--discrete --dt DT] [--second-order]
                       [--minimal] [--format text|json|npz] [--output FILE]
    python -m core.cli ...                                              (the same)

MODEL is a packaged model's name (``cartpole.yaml``, ``arm7.urdf``; see ``core.data.model_names()``),
a YAML file or a URDF file (``--floating-base [euler|quaternion]``, ``--actuated`` as
:func:`core.load_urdf`).
``--q``, ``--dq``, ``--u`` take numbers separated by commas or spaces, in the order the header
prints (default: zeros), or ``name=value`` pairs that set single entries of the zero vector
(``--q theta=0.3``); write ``--q=-0.5,1`` or ``--q -0.5 1`` for a leading minus.

It prints (text), or writes (json to stdout or ``--output``; npz to ``--output``), ``A``, ``B``
(and ``H`` with ``--second-order``), the eigenvalues of ``A`` and the rank of the
controllability matrix ``[B, AB, ..., A^(n-1) B]`` out of ``n``, with the state and input
names in order. It calls only the library's exact functions:

* continuous (default): :meth:`core.System.linearize` (``linearize2`` with
  ``--second-order``), ``d/dt x = A x + B u``, ``x = [q, dq]``,
  ``u = [force inputs, ddq of the kinematic variables]``;
  ``H[i, a, b] = d2 (d/dt x)_i / dz_a dz_b``, ``z = [q, dq, u]``;
* ``--discrete --dt DT``: the midpoint variational integrator's one-step map
  (:meth:`core.MidpointVI.linearize`, ``linearize2`` with ``--second-order``),
  ``x_k+1 = A x_k + B u_k``, ``x_k = [q, p (dynamic variables), v (kinematic velocities)]``
  (the exact transform of ``--q``, ``--dq``), ``u_k = [force inputs, next values of the
  kinematic variables]`` (default: held where ``--q`` has them);
  ``H[i, a, b] = d2 x_k+1,i / dz_a dz_b``, ``z = [x_k, u_k]``;
* ``--minimal``: :meth:`core.System.linearize_minimal`, continuous, in independent
  coordinates and speeds.

Exit status: 0, 1 when the model cannot be loaded or linearized there (the library's reason on
stderr), 2 for a usage error (which argument, what length, which names).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

FORMATS = ("text", "json", "npz")
VECTOR_OPTIONS = ("--q", "--dq", "--u")
_VALUE = re.compile(r"^(?:[A-Za-z_][\w.]*=)?[-+]?(?:\d|\.\d|inf|nan)", re.IGNORECASE)


class UsageError(Exception):
    """A bad command line: reported with exit status 2."""


@dataclass
class Linearization:
    """What :func:`linearize` computed, with the names and conventions to print it."""
    model: str
    kind: str                     # "continuous", "discrete" or "minimal"
    state_names: list
    input_names: list
    A: np.ndarray
    B: np.ndarray
    H: np.ndarray | None
    q: np.ndarray
    dq: np.ndarray
    u: np.ndarray
    x: np.ndarray | None = None   # the discrete state (discrete only)
    dt: float | None = None
    eigenvalues: Any = None        # (n,) complex; None until computed
    controllability_rank: int = 0
    convention: str = ""
    seconds: float = 0.0

    def __post_init__(self):
        if self.eigenvalues is None:
            self.eigenvalues = np.linalg.eigvals(self.A) if self.A.size else np.zeros(0, complex)
        self.controllability_rank = controllability_rank(self.A, self.B)


CONVENTION = {
    "continuous": "d/dt x = A x + B u; x = [q, dq]; u = [force inputs, ddq of the kinematic "
                  "variables]; H[i, a, b] = d2 (d/dt x)_i / dz_a dz_b, z = [q, dq, u] "
                  "(core.System.linearize/linearize2)",
    "discrete": "x_k+1 = A x_k + B u_k (midpoint variational integrator, time step dt); "
                "x_k = [q, p of the dynamic variables, v of the kinematic variables]; u_k = "
                "[force inputs, next values of the kinematic variables]; H[i, a, b] = "
                "d2 x_k+1,i / dz_a dz_b, z = [x_k, u_k] (core.MidpointVI.linearize/linearize2)",
    "minimal": "d/dt x_i = A x_i + B u; x_i = [independent q, independent dq] in model order "
               "(core.System.linearize_minimal)",
}


def controllability_rank(A, B) -> int:
    """Rank of ``[B, AB, ..., A^(n-1) B]`` (:func:`core.controllability`); 0 without inputs."""
    from core.control.riccati import controllability
    if A.shape[0] == 0 or B.ndim != 2 or B.shape[1] == 0:
        return 0
    return controllability(A, B).rank


# ------------------------------------------------------------------------------ inputs
def load_model(model: str, floating_base=False, actuated=None):
    """The :class:`core.System` of ``model`` (:func:`core.read_model`: a YAML or URDF file, a
    packaged model's name, or model text); ``--floating-base`` and ``--actuated`` only for URDF."""
    from core.io.loader import load_system, read_model
    read = read_model(model)
    options = {k: v for k, v in (("floating_base", floating_base), ("actuated", actuated)) if v}
    if options and not read.urdf:
        raise UsageError(f"--floating-base and --actuated apply to a URDF model, not {model!r}")
    return load_system(read, **options)


def parse_vector(option: str, text: str | None, names: list, default=None) -> np.ndarray:
    """``text`` (numbers separated by commas or spaces, or ``name=value`` pairs setting
    entries of ``default``/zeros) as a vector of ``len(names)`` entries; a
    :class:`UsageError` naming ``option``, the expected length and ``names`` otherwise."""
    n = len(names)
    out = np.zeros(n) if default is None else np.array(default, dtype=float)
    if text is None:
        return out
    tokens = [t for t in re.split(r"[,\s]+", text.strip()) if t]
    expected = f"{n} value{'s' if n != 1 else ''} ({', '.join(names) or 'none'})"
    if not tokens:
        return out if n == 0 else _fail(f"{option}: expected {expected}, got none")
    named = ["=" in t for t in tokens]
    if any(named) and not all(named):
        raise UsageError(f"{option}: mix of plain values and name=value pairs in {text!r}")
    if all(named):
        for t in tokens:
            name, _, value = t.partition("=")
            if name not in names:
                raise UsageError(f"{option}: no coordinate {name!r}; expected one of {names}")
            out[names.index(name)] = _float(option, value)
        return out
    if len(tokens) != n:
        raise UsageError(f"{option}: expected {expected}, got {len(tokens)} value"
                         f"{'s' if len(tokens) != 1 else ''}")
    return np.array([_float(option, t) for t in tokens])


def _fail(message):
    raise UsageError(message)


def _float(option: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{option}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise UsageError(f"{option}: {text!r} is not a finite number")
    return value


def _join_values(argv: list) -> list:
    """``--q -1 2`` (values that argparse would take for options) as ``--q=-1,2``."""
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        if token in VECTOR_OPTIONS:
            values = []
            while i + 1 < len(argv) and _VALUE.match(argv[i + 1]):
                values.append(argv[i + 1])
                i += 1
            out.append(f"{token}={','.join(values)}" if values else token)
        else:
            out.append(token)
        i += 1
    return out


# ------------------------------------------------------------------------------ linearization
def linearize(system, q=None, dq=None, u=None, *, discrete: bool = False, dt: float | None = None,
              second_order: bool = False, minimal: bool = False, independent=None,
              residual_limit: float | None = 1e-6, model: str = "") -> Linearization:
    """The exact linearization of ``system`` at ``(q, dq, u)`` (text values as for the command
    line, or arrays; None: zeros, and for the discrete input the kinematic variables held)."""
    if second_order and minimal:
        raise UsageError("--second-order does not combine with --minimal (the minimal "
                         "linearization is first order)")
    if minimal and discrete:
        raise UsageError("--minimal is a continuous linearization (System.linearize_minimal); "
                         "it does not combine with --discrete")
    if discrete and dt is None:
        raise UsageError("--discrete needs --dt DT (the integrator's time step in seconds)")
    if dt is not None and not discrete:
        raise UsageError("--dt is the time step of --discrete; add --discrete")
    names = system.config_names
    q = _vector("--q", q, names, system.neutral())
    dq = _vector("--dq", dq, system.velocity_names)
    t0 = time.perf_counter()
    if discrete:
        from core.discrete.midpoint import MidpointVI
        from core.validation import time_step
        try:
            dt = time_step("dt", dt)
        except ValueError as exc:
            raise UsageError(f"--dt: {exc}") from None
        vi = MidpointVI(system, dt)
        held = np.concatenate([np.zeros(system.nu), q[vi.kinematic_index]])
        u = _vector("--u", u, vi.input_names, held)
        x = vi.discrete_state(q, dq)
        A, B, *H = vi.linearize2(x, u) if second_order else vi.linearize(x, u)
        return Linearization(model, "discrete", vi.state_names, vi.input_names, A, B,
                             H[0] if H else None, q, dq, u, x=x, dt=dt,
                             convention=CONVENTION["discrete"], seconds=time.perf_counter() - t0)
    if minimal:
        u = _vector("--u", u, system.continuous_input_names)
        A, B, info = system.linearize_minimal(q, dq, u, independent,
                                              residual_limit=residual_limit)
        inputs = system.continuous_input_names
        return Linearization(model, "minimal", info.state_names, list(inputs), A, B, None, q, dq,
                             u, convention=CONVENTION["minimal"], seconds=time.perf_counter() - t0)
    u = _vector("--u", u, system.continuous_input_names)
    if second_order:
        A, B, H = system.linearize2(q, dq, u)
    else:
        (A, B), H = system.linearize(q, dq, u, residual_limit=residual_limit), None
    return Linearization(model, "continuous", system.state_names,
                         system.continuous_input_names, A, B, H, q, dq, u,
                         convention=CONVENTION["continuous"], seconds=time.perf_counter() - t0)


def _vector(option, value, names, default=None):
    if value is None or isinstance(value, str):
        return parse_vector(option, value, list(names), default)
    arr = np.asarray(value, dtype=float)
    if arr.shape != (len(names),):
        raise UsageError(f"{option}: expected {len(names)} values ({', '.join(names)}), got "
                         f"shape {arr.shape}")
    return arr


# ------------------------------------------------------------------------------ output
def matrix_text(M: np.ndarray, rows: list, cols: list, precision: int = 6) -> str:
    """``M`` as a table with its row and column names."""
    if M.size == 0:
        return f"  (empty, {M.shape[0]} x {M.shape[1]})"
    cells = [[f"{v:.{precision}g}" for v in row] for row in M]
    width = max(max(len(c) for row in cells for c in row), max(len(c) for c in cols)) + 2
    left = max(len(r) for r in rows) + 2
    lines = [" " * left + "".join(c.rjust(width) for c in cols)]
    for name, row in zip(rows, cells, strict=True):
        lines.append(name.ljust(left) + "".join(c.rjust(width) for c in row))
    return "\n".join(lines)


def _vec(v: np.ndarray, precision: int = 6) -> str:
    return "[" + ", ".join(f"{x:.{precision}g}" for x in v) + "]"


def format_text(r: Linearization, precision: int = 6) -> str:
    """The report: header (model, convention, names), ``A``, ``B`` (``H``), eigenvalues and
    the controllability rank."""
    nx = len(r.state_names)
    out = [f"model {r.model}: {r.kind} linearization"
           + (f", dt = {r.dt:g} s" if r.dt is not None else ""),
           f"convention: {r.convention}",
           f"state x ({nx}): {', '.join(r.state_names)}",
           f"input u ({len(r.input_names)}): {', '.join(r.input_names) or '(none)'}",
           f"at q = {_vec(r.q, precision)}, dq = {_vec(r.dq, precision)}",
           f"   u = {_vec(r.u, precision)}"
           + (f", x = {_vec(r.x, precision)}" if r.x is not None else ""),
           "", f"A ({nx} x {nx}):", matrix_text(r.A, r.state_names, r.state_names, precision),
           "", f"B ({nx} x {len(r.input_names)}):",
           matrix_text(r.B, r.state_names, r.input_names, precision)]
    if r.H is not None:
        z = list(r.state_names) + list(r.input_names)
        out += ["", f"H ({nx} x {len(z)} x {len(z)}), H[i] = d2 x_next,i / dz dz, z = [x, u]:"]
        for i, name in enumerate(r.state_names):
            out += [f"H[{i}] ({name}):", matrix_text(r.H[i], z, z, precision)]
    ev = sorted(r.eigenvalues, key=lambda c: (-c.real, -c.imag))
    out += ["", f"eigenvalues of A ({len(ev)}):"]
    out += ["  " + (f"{e.real:.{precision}g}" if e.imag == 0 else
                    f"{e.real:.{precision}g} {'-' if e.imag < 0 else '+'} {abs(e.imag):.{precision}g}j")
            for e in ev]
    out += ["", f"controllability rank: {r.controllability_rank} of {nx}"
            + (" (controllable)" if r.controllability_rank == nx else " (not controllable)")]
    return "\n".join(out) + "\n"


def to_dict(r: Linearization) -> dict:
    """The report as JSON-ready lists (floats exact: JSON keeps Python's shortest repr)."""
    d = {"model": r.model, "kind": r.kind, "convention": r.convention,
         "state_names": list(r.state_names), "input_names": list(r.input_names),
         "q": r.q.tolist(), "dq": r.dq.tolist(), "u": r.u.tolist(),
         "A": r.A.tolist(), "B": r.B.tolist(),
         "eigenvalues": {"real": r.eigenvalues.real.tolist(), "imag": r.eigenvalues.imag.tolist()},
         "controllability_rank": r.controllability_rank, "nx": len(r.state_names)}
    if r.x is not None:
        d["x"], d["dt"] = r.x.tolist(), r.dt
    if r.H is not None:
        d["H"] = r.H.tolist()
    return d


def to_json(r: Linearization) -> str:
    """:func:`to_dict` as JSON, one key a line."""
    items = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in to_dict(r).items()]
    return "{\n" + ",\n".join(items) + "\n}\n"


def write_npz(r: Linearization, path: str) -> None:
    """Arrays ``A``, ``B`` (``H``), ``eigenvalues``, ``state_names``, ``input_names``, ``q``,
    ``dq``, ``u`` (``x``, ``dt``), ``controllability_rank``, ``kind``, ``convention``."""
    arrays: dict[str, Any] = dict(A=r.A, B=r.B, eigenvalues=r.eigenvalues, state_names=np.array(r.state_names, str),
                  input_names=np.array(r.input_names, str), q=r.q, dq=r.dq, u=r.u,
                  controllability_rank=np.array(r.controllability_rank), kind=np.array(r.kind),
                  convention=np.array(r.convention), model=np.array(r.model))
    if r.H is not None:
        arrays["H"] = r.H
    if r.x is not None:
        arrays["x"], arrays["dt"] = r.x, np.array(r.dt)
    np.savez(path, **arrays)


# ------------------------------------------------------------------------------ command line
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mechnode-linearize", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="packaged model name (e.g. cartpole.yaml), YAML or URDF path")
    p.add_argument("--q", help="configuration, in the order of the header (default zeros)")
    p.add_argument("--dq", help="velocities (default zeros)")
    p.add_argument("--u", help="inputs (default zeros; discrete: kinematic variables held)")
    p.add_argument("--discrete", action="store_true", help="the variational integrator's map")
    p.add_argument("--dt", type=float, help="time step of --discrete [s]")
    p.add_argument("--second-order", action="store_true", help="also H (second derivatives)")
    p.add_argument("--minimal", action="store_true", help="independent coordinates only")
    p.add_argument("--independent", help="--minimal: names of the independent coordinates "
                   "and/or speeds, separated by commas (default: automatic)")
    p.add_argument("--residual-limit", default="1e-6",
                   help="refuse a state off the constraints by more ('none' skips; default 1e-6)")
    p.add_argument("--floating-base", nargs="?", const="euler", choices=("euler", "quaternion"),
                   help="URDF: a floating root, the six-coordinate Euler chart (the default) or a "
                        "quaternion free-flyer (continuous linearization only)")
    p.add_argument("--actuated", help="URDF: joints with an input, separated by commas")
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--output", "-o", help="write here instead of stdout (needed for npz)")
    p.add_argument("--precision", type=int, default=6, help="text: significant digits")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser().parse_args(_join_values(argv))
    except SystemExit as exc:         # argparse: usage error (2) or --help (0)
        return int(exc.code or 0)
    try:
        if args.format == "npz" and not args.output:
            raise UsageError("--format npz writes a file: give --output FILE")
        limit = None if args.residual_limit.lower() == "none" else \
            _float("--residual-limit", args.residual_limit)
        actuated = None if args.actuated is None else [a for a in args.actuated.split(",") if a]
        independent = None if args.independent is None else \
            [a for a in re.split(r"[,\s]+", args.independent) if a]
        try:
            system = load_model(args.model, args.floating_base, actuated)
        except UsageError:
            raise
        except Exception as exc:      # noqa: BLE001 - a model that does not load: its reason
            print(f"mechnode-linearize: cannot load {args.model}: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            return 1
        from core.errors import CoreError
        try:
            r = linearize(system, args.q, args.dq, args.u, discrete=args.discrete, dt=args.dt,
                          second_order=args.second_order, minimal=args.minimal,
                          independent=independent, residual_limit=limit, model=args.model)
        except UsageError:
            raise
        except (CoreError, ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:
            print(f"mechnode-linearize: cannot linearize {args.model} there: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    except UsageError as exc:
        print(f"mechnode-linearize: error: {exc}", file=sys.stderr)
        return 2
    if args.format == "npz":
        write_npz(r, args.output)
        return 0
    text = format_text(r, args.precision) if args.format == "text" else to_json(r)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
