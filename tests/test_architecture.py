"""The shape of the code: core's imports form a DAG, the node uses only core's public API, the
conventions are written once, and one error hierarchy covers every failure."""
import ast
import inspect
import os
import subprocess
import sys

import numpy as np

import core
from core import cache, errors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = os.path.join(ROOT, "core")
MECHNODE = os.path.join(ROOT, "mechnode")


def python_files(package_dir):
    for base, _, files in os.walk(package_dir):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(base, name)


def imported_modules(path):
    """Every module ``path`` imports, top-level or inside functions, as absolute names."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    here = os.path.splitext(os.path.relpath(path, ROOT))[0].replace(os.sep, ".")
    parts = here.split(".")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[:len(parts) - node.level]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found += [(module, alias.name) for alias in node.names]
    return found


def package_graph(package_dir):
    """Edges module -> module of the same package it imports (``from . import x`` counts as
    ``package.x``; ``package/__init__.py`` is ``package``), imports inside functions included."""
    package = os.path.basename(package_dir)
    modules = {os.path.splitext(os.path.relpath(p, ROOT))[0].replace(os.sep, "."): p
               for p in python_files(package_dir)}
    modules = {(m[:-len(".__init__")] if m.endswith(".__init__") else m): p for m, p in modules.items()}
    graph = {}
    for module, path in modules.items():
        edges = set()
        for target, name in imported_modules(path):
            if target and f"{target}.{name}" in modules:
                edges.add(f"{target}.{name}")
            elif target in modules and target != module:
                edges.add(target)
        graph[module] = edges - {package} if module != package else edges
    return graph


def core_graph():
    return package_graph(CORE)


def find_cycle(graph):
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if state.get(nxt) is None:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_core_imports_form_a_dag():
    graph = core_graph()
    assert "core.model.record" in graph and "core.system" in graph
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
    # the compiled record is a leaf: it imports only the StructRef helpers and core's njit
    assert graph["core.model.record"] == {"core.base.records", "core.base.jit"}
    assert graph["core.base.jit"] == set()


#: core's layers, leaves first (docs/design.md's module map): a module imports only modules of
#: its own layer or of layers before it
CORE_LAYERS = (
    ("core.errors", "core.validation", "core.conventions", "core.progress", "core.cache", "core.data"),
    ("core.base",), ("core.model",), ("core.tree",), ("core.continuous",), ("core.system",), ("core.io",),
    ("core.discrete",), ("core.control",), ("core.general",),
    ("core.datatypes", "core.examples", "core.warmup", "core.demo", "core.cli", "core"),
)


def core_layer(module):
    """The index in :data:`CORE_LAYERS` of ``module`` (a package's modules are in its layer)."""
    found = [i for i, layer in enumerate(CORE_LAYERS)
             for prefix in layer if module == prefix or (prefix != "core" and module.startswith(prefix + "."))]
    assert len(found) == 1, f"{module}: in no layer or in several: {found}"
    return found[0]


def test_core_layers_import_only_the_layers_below():
    offences = [f"{a} (layer {core_layer(a)}) imports {b} (layer {core_layer(b)})"
                for a, edges in core_graph().items() for b in edges if core_layer(b) > core_layer(a)]
    assert not offences, offences
    # the check can fail: an algorithm importing the façade above it would be an offence
    assert core_layer("core.system") > core_layer("core.continuous.dynamics")


def test_mechnode_imports_form_a_dag_and_core_never_imports_it():
    graph = package_graph(MECHNODE)
    assert "mechnode.ros.node" in graph and "mechnode.demo" in graph
    assert "mechnode.ros.middleware" in graph["mechnode.cli"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
    upward = [f"{os.path.relpath(p, ROOT)}: {t}" for p in python_files(CORE) for t, _ in imported_modules(p)
              if t and (t == "mechnode" or t.startswith("mechnode."))]
    assert not upward, upward


def test_the_node_logic_is_ros_free():
    """mechnode.logic never imports mechnode.ros (or the node's entry points), and importing every
    module of it loads no ROS 2 package: the node's logic runs and is tested without ROS."""
    graph = package_graph(MECHNODE)
    logic = sorted(m for m in graph if m.startswith("mechnode.logic"))
    assert len(logic) >= 10, logic
    offences = [f"{m} imports {t}" for m in logic for t in graph[m] if not t.startswith("mechnode.logic")
                and t not in ("mechnode.errors", "mechnode.paths")]
    assert not offences, offences
    code = ("import sys; " + "; ".join(f"import {m}" for m in logic) +
            "; ros = sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'rosidl_runtime_py', "
            "'std_msgs', 'sensor_msgs', 'trajectory_msgs', 'mechnode_interfaces', 'builtin_interfaces')"
            " or m.startswith('mechnode.ros')); print(ros); assert not ros, ros")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_cycle_check_can_fail():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_node_uses_only_core_public_api():
    public = set(core.__all__) | set(core.PUBLIC_MODULES)
    modules = {f"core.{m}": set(getattr(core, m).__all__) for m in core.PUBLIC_MODULES}
    offences = []
    for path in python_files(MECHNODE):
        rel = os.path.relpath(path, ROOT)
        source = open(path, encoding="utf-8").read()
        for target, name in imported_modules(path):
            if target == "core":
                if name is not None and name not in public:
                    offences.append(f"{rel}: from core import {name}")
            elif target and target.startswith("core."):
                if target not in modules or (name is not None and name not in modules[target]):
                    offences.append(f"{rel}: from {target} import {name}")
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "core" and node.attr not in public):
                offences.append(f"{rel}:{node.lineno}: core.{node.attr}")
            # core's public modules: only their own __all__
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == "core"
                    and node.value.attr in core.PUBLIC_MODULES
                    and node.attr not in modules[f"core.{node.value.attr}"]):
                offences.append(f"{rel}:{node.lineno}: core.{node.value.attr}.{node.attr}")
    assert not offences, "\n".join(offences)


def test_core_all_holds_the_calls_and_the_public_modules_the_rest():
    """``core.__all__`` is what a user calls (functions, classes to make, the conventions and the
    base error); the other public names are in the public modules' ``__all__``, each in one."""
    for name in core.__all__:
        obj = getattr(core, name)
        assert (inspect.isfunction(obj) or (inspect.isclass(obj) and not issubclass(obj, Exception))
                or name in ("CONVENTIONS", "CoreError")), name
    assert 20 <= len(core.__all__) <= 30, core.__all__
    with open(os.path.join(ROOT, "docs", "guide.md")) as fh:     # the guide says how many
        assert f"`core.__all__` is what you call ({len(core.__all__)} names:" in fh.read()
    seen = set(core.__all__) - {"CoreError"}
    for module in core.PUBLIC_MODULES:
        names = getattr(core, module).__all__
        assert names and not seen & set(names), (module, seen & set(names))
        seen |= set(names)
        for name in names:
            assert hasattr(getattr(core, module), name), f"core.{module}.{name}"
    # what core's calls raise and return is public: every error class, and the result types
    assert set(core.errors.__all__) == {c.__name__ for c in vars(core.errors).values()
                                         if inspect.isclass(c) and issubclass(c, (Exception, Warning))
                                         and c.__module__ == "core.errors"}
    assert type(core.controllability(np.eye(2), np.ones((2, 1)))) is core.datatypes.Controllability


def test_names_moved_out_of_core_still_read_with_a_warning():
    import importlib
    import warnings
    for name, (module, attr, instead) in core._MOVED.items():
        assert name not in core.__all__ and hasattr(importlib.import_module(module), attr)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert getattr(core, name) is getattr(importlib.import_module(module), attr)
        assert [w.category for w in caught] == [DeprecationWarning], caught
        assert (instead or f"use {module}.{attr}") in str(caught[0].message)
        if module in {f"core.{m}" for m in core.PUBLIC_MODULES}:
            assert attr in importlib.import_module(module).__all__, (name, module)
    # the names the examples and the guide used before the API shrank are all still readable
    for name in ("ModelError", "Model", "Workspace", "ModelText", "read_yaml", "model_file", "TREP_ARMIJO",
                 "trajectory_cost", "cost_and_gradient", "TrajectoryOptimizationResult", "DiscreteSystem"):
        assert name in core._MOVED, name
    assert not hasattr(core, "no_such_name")


def test_every_public_name_exists():
    for name in core.__all__:
        assert hasattr(core, name), name


def test_conventions_written_once_and_rendered_in_the_guide():
    guide = open(os.path.join(ROOT, "docs", "guide.md"), encoding="utf-8").read()
    assert core.CONVENTIONS in guide
    out = subprocess.run([sys.executable, "-m", "core.conventions"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    assert out == core.CONVENTIONS


def test_one_error_hierarchy():
    for cls in (core.errors.ModelError, core.errors.SingularMatrixError, core.errors.RiccatiError,
                core.errors.IntegratorError, core.errors.LinearizerError):
        assert issubclass(cls, core.CoreError)
    assert issubclass(core.errors.ModelError, ValueError) and issubclass(core.errors.LinearizerError, ValueError)
    assert issubclass(core.errors.RiccatiError, core.errors.SingularMatrixError)
    assert issubclass(core.errors.SingularMatrixError, np.linalg.LinAlgError)
    assert issubclass(core.errors.IntegratorError, ArithmeticError)
    from core.general.linearizer import SingularMatrixError as linearizer_singular
    assert linearizer_singular is core.errors.SingularMatrixError
    codes = {name: getattr(errors, name) for name in dir(errors) if name.isupper()}
    assert len(set(codes.values())) == len(codes), codes


def test_system_attributes_are_written_by_system_only():
    s = core.load_system("double_pendulum.yaml")
    ws = s.workspace
    assert isinstance(ws, core.datatypes.Workspace) and ws.model is s.model
    data, der = ws.get()
    assert ws.get()[0] is data                              # per thread, kept
    assert "_workspaces" not in vars(s)
    s.add_damping(s.config_names[0], 0.1)                   # any change recompiles
    assert s.workspace is not ws and s.workspace.model is s.model


def test_stale_kernels_are_dropped_when_a_source_changes(tmp_path, monkeypatch):
    cache_dir = tmp_path / "__pycache__"
    cache_dir.mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    stale = cache_dir / "a.f-1.py311.nbi"
    stale.write_text("index")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(cache, "SOURCE_DIR", str(tmp_path))
    monkeypatch.setattr(cache, "CACHE_DIR", str(cache_dir))
    monkeypatch.setattr(cache, "STAMP", str(cache_dir / "core-sources.sha1"))
    assert cache.drop_stale_kernels() and not stale.exists()       # no stamp yet: dropped
    stale.write_text("index")
    assert not cache.drop_stale_kernels() and stale.exists()       # unchanged sources: kept
    (tmp_path / "a.py").write_text("x = 2\n")
    assert cache.drop_stale_kernels() and not stale.exists()       # a source changed: dropped
    # a layer's sub-package: its kernels are cached beside it, and dropped when any source changes
    (tmp_path / "layer" / "__pycache__").mkdir(parents=True)
    (tmp_path / "layer" / "b.py").write_text("y = 1\n")
    inner = tmp_path / "layer" / "__pycache__" / "b.g-1.py311.nbi"
    inner.write_text("index")
    assert cache.drop_stale_kernels() and not inner.exists()       # a new source: dropped
    inner.write_text("index")
    assert not cache.drop_stale_kernels() and inner.exists()
    (tmp_path / "a.py").write_text("x = 3\n")
    assert cache.drop_stale_kernels() and not inner.exists()       # another layer's source changed


def test_no_private_core_names_in_the_node():
    text = "\n".join(open(p, encoding="utf-8").read() for p in python_files(MECHNODE))
    assert "core._" not in text and "from core." not in text and "import core." not in text


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore is its module's own: no module of core or mechnode
    imports one from another (what a layer offers the next is public)."""
    offences = []
    for package in (CORE, MECHNODE):
        for path in python_files(package):
            offences += [f"{os.path.relpath(path, ROOT)}: from {target} import {name}"
                         for target, name in imported_modules(path)
                         if target and target.split(".")[0] in ("core", "mechnode") and name
                         and name.startswith("_") and not name.startswith("__")]
    assert not offences, offences


def test_the_module_map_has_one_row_per_python_file():
    """docs/design.md's module map: a row ``| `path` | what it is |`` for every Python file of
    core/ and mechnode/, one file per row, none that is not in the tree."""
    import re
    text = open(os.path.join(ROOT, "docs", "design.md"), encoding="utf-8").read()
    section = text[text.index("## Module map"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    mapped = [re.match(r"\| `([^`]+)` \|", line).group(1) for line in rows]
    assert all(line.count("`") - line.split("|")[2].count("`") == 2 for line in rows), \
        "one file per row"
    tree = sorted(os.path.relpath(p, ROOT).replace(os.sep, "/")
                  for d in (CORE, MECHNODE) for p in python_files(d))
    assert len(mapped) == len(set(mapped)), sorted({m for m in mapped if mapped.count(m) > 1})
    assert sorted(mapped) == tree, (f"missing from the map: {sorted(set(tree) - set(mapped))}; "
                                    f"not in the tree: {sorted(set(mapped) - set(tree))}")


#: The most lines a module of core/ or mechnode/ may have: a room a newcomer can read through.
MAX_MODULE_LINES = 800


def test_no_module_is_over_800_lines():
    sizes = {os.path.relpath(p, ROOT): sum(1 for _ in open(p, encoding="utf-8"))
             for d in (CORE, MECHNODE) for p in python_files(d)}
    assert len(sizes) > 50 and "core/system.py" in sizes
    over = {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (give each idea its own module): {over}"


#: Kernels that call raw tree kernels through their module (``rnea.mass_matrix``) and why that is
#: right: flat kernels (core.base.jit.flat) entered only without coupled variables (nj == nq).
RAW_TREE_CALLERS = {("core.continuous.dynamics", "_articulated"), ("core.continuous.dynamics", "_linearize_tree")}


def _raw_attribute_calls(path, raw, wrapped):
    """``(top-level function or "<module>", "module.name")`` for every use of a wrapped kernel
    through a raw module imported whole (``from core.tree import rnea``; ``rnea.mass_matrix``)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "core.tree" and not node.level:
            aliases.update({a.asname or a.name: f"core.tree.{a.name}" for a in node.names
                            if f"core.tree.{a.name}" in raw})
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.name in raw and a.asname})
    found = []
    for top in tree.body:
        owner = top.name if isinstance(top, ast.FunctionDef | ast.ClassDef) else "<module>"
        found += [(owner, f"{node.value.id}.{node.attr}") for node in ast.walk(top)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in aliases and node.attr in wrapped]
    return found


def test_only_the_coupling_calls_the_raw_tree_kernels_it_wraps():
    """core.tree.coupling's ``coupled_<name>`` wraps the tree kernel ``<name>`` (of the joints) for
    the variables; any other module that called the raw kernel would be wrong on mimic models,
    except the flat kernels of RAW_TREE_CALLERS, which never see coupled variables."""
    from core.tree import coupling
    wrapped = {name[len("coupled_"):] for name in dir(coupling) if name.startswith("coupled_")}
    assert {"prepare", "gradient_hessian", "generalized_force", "holonomic", "mass_matrix"} <= wrapped
    raw = {f"core.tree.{m}" for m in ("kinematics", "lagrangian", "forces", "constraints", "rnea")}
    offences, allowed_seen = [], set()
    for path in python_files(CORE):
        module = os.path.splitext(os.path.relpath(path, ROOT))[0].replace(os.sep, ".")
        if module in raw | {"core.tree.coupling"}:
            continue
        offences += [f"{module}: from {target} import {name}" for target, name in imported_modules(path)
                     if target in raw and name in wrapped]
        for owner, call in _raw_attribute_calls(path, raw, wrapped):
            if (module, owner) in RAW_TREE_CALLERS:
                allowed_seen.add((module, owner))
            else:
                offences.append(f"{module}.{owner}: {call}")
    assert not offences, offences
    assert allowed_seen == RAW_TREE_CALLERS      # (the allowance names kernels that exist and call them)


#: Public names whose docstring is no numpydoc: exceptions and warnings (their message is the
#: documentation), and the compiled model record (its fields are described in core.model.record).
NO_SECTIONS = {"datatypes.Model"}


def _sections_missing(obj, what: str) -> list[str]:
    """numpydoc sections missing from ``obj``'s docstring: ``Parameters`` when it takes any
    (``Attributes`` also for a class), ``Returns`` for a function that returns something."""
    doc = inspect.getdoc(obj) or ""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    params = [p for p in sig.parameters if p not in ("self", "cls")]
    missing = []
    if params and "Parameters\n----------" not in doc and not (
            inspect.isclass(obj) and "Attributes\n----------" in doc):
        missing.append(f"{what}: Parameters")
    if not inspect.isclass(obj) and sig.return_annotation not in (None, "None") \
            and "Returns\n-------" not in doc and "Yields\n------" not in doc:
        missing.append(f"{what}: Returns")
    return missing


def test_public_docstrings_have_numpydoc_sections():
    """Every function and class of ``core.__all__`` and every public method of ``System`` and
    ``MidpointVI`` that takes parameters documents them in numpydoc sections (Parameters or, for
    a class, Attributes; Returns for what returns something)."""
    missing = []
    public = [(name, getattr(core, name)) for name in core.__all__]
    public += [(f"{m}.{name}", getattr(getattr(core, m), name)) for m in core.PUBLIC_MODULES
               for name in getattr(core, m).__all__]
    for name, obj in public:
        if name in NO_SECTIONS or (inspect.isclass(obj) and issubclass(obj, (Exception, Warning))):
            continue
        if inspect.isfunction(obj) or inspect.isclass(obj):
            missing += _sections_missing(obj, name)
    for cls in (core.System, core.MidpointVI):
        for part in cls.__mro__[:-1]:       # (the façade and the classes it is made of)
            for name, member in vars(part).items():
                if not name.startswith("_") and inspect.isfunction(member):
                    missing += _sections_missing(member, f"{cls.__name__}.{name}")
    assert not missing, "\n".join(missing)


_twice_kernel = None      # (set by the test below: the numba kernel of _twice)


def _twice(x):
    return 2.0 * x


def _flat_caller(x):
    return _twice_kernel(x) + 1.0


def _plain_caller(x):
    return _twice_kernel(x) + 1.0


def test_flat_kernels_inline_the_into_flat_kernels_and_no_other_caller_does():
    """A kernel compiled with ``inline=INTO_FLAT`` is inlined into :func:`core.base.jit.flat`
    kernels (never compiled on its own for them) and called by any other kernel; the O(n) paths
    are flat and inline the tree kernels."""
    global _twice_kernel
    from core.base.jit import INTO_FLAT, flat, njit
    from core.continuous import dynamics
    from core.tree import kinematics, rnea
    _twice_kernel = njit(inline=INTO_FLAT)(_twice)
    flat_kernel, plain_kernel = njit(flat(_flat_caller)), njit(_plain_caller)
    assert flat_kernel(1.5) == 4.0
    assert len(_twice_kernel.overloads) == 0          # inlined: not compiled by itself
    assert plain_kernel(1.5) == 4.0
    assert len(_twice_kernel.overloads) == 1          # called
    for kernel in (dynamics._linearize_tree, dynamics._articulated):
        assert kernel.py_func.core_flat
    for kernel in (kinematics.forward_kinematics, rnea.mass_matrix, rnea.inverse_dynamics_derivatives,
                   rnea.articulated_body):
        assert kernel.targetoptions["inline"] is INTO_FLAT


_ALLOCATION_CHECK = """
import numpy as np
from numba import njit
from numba.core.runtime import rtsys
import core
from core.continuous.dynamics import forward_dynamics, linearize_plain

@njit
def calls(ev, q, dq, u, ddq, A, B, k):
    for _ in range(k):
        forward_dynamics(ev, q, dq, u, ddq)
        linearize_plain(ev, q, dq, u, A, B)

def tree(damper):
    s = core.System()
    s.add_frame("a", "world", rz="q1", mass=1.0, inertia=[0.01, 0.02, 0.03], com=[0.3, 0.0, 0.1])
    s.add_frame("b", "a", ty="q2", mass=0.5, inertia=[0.01, 0.01, 0.01], com=[0.0, 0.2, 0.0])
    s.add_frame("c", "a", rx="q3", mass=0.7, inertia=[0.02, 0.01, 0.01], com=[0.1, 0.0, 0.2])
    s.add_damping("q1", 0.2)
    s.add_spring("config", config="q3", stiffness=3.0)
    s.add_input("torque", config="q1")
    s.add_input("torque", config="q3")
    if damper:
        s.add_damper("b", "c", 0.4)
    return s

for damper in (False, True):
    s = tree(damper)
    q, dq, u = np.array([0.3, 0.1, -0.4]), np.array([0.5, -0.2, 0.7]), np.array([0.2, -0.1])
    ev = s.workspace.evaluation()
    ddq, A, B = np.empty(3), np.empty((6, 6)), np.empty((6, 2))
    calls(ev, q, dq, u, ddq, A, B, 1)
    assert ev.status[0] == 0, ev.status
    assert np.array_equal(ddq, s.qdd(q, dq, u)) and np.array_equal(A, s.linearize(q, dq, u)[0])
    counts = [rtsys.get_allocation_stats().alloc]
    for k in (0, 10):       # (the call's own arguments count too: the difference is the kernels')
        calls(ev, q, dq, u, ddq, A, B, k)
        counts.append(rtsys.get_allocation_stats().alloc)
    print(counts[2] - 2 * counts[1] + counts[0])
"""


def test_qdd_and_the_tree_linearization_allocate_nothing():
    """``System.qdd`` and ``System.linearize`` of a tree (springs on variables, joint damping,
    torques) allocate nothing in their kernels: the tree kernels' temporaries are in the
    per-thread Data and Work. numba counts allocations with ``NUMBA_NRT_STATS=1`` (read when it
    starts: a process of its own); a damper between frames allocates, which shows the count
    works."""
    env = dict(os.environ, NUMBA_NRT_STATS="1")
    out = subprocess.run([sys.executable, "-c", _ALLOCATION_CHECK], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    plain, with_damper = (int(x) for x in out.stdout.split())
    assert plain == 0, f"{plain} allocations in 10 calls of qdd and linearize"
    assert with_damper > 0
