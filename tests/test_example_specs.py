"""core.examples' models as data: ``chain_spec`` / ``branched_tree_spec`` are plain dicts (YAML
once dumped) that :func:`core.load_system` turns into the same systems the System API builds,
so a process can hand such a model to the node as data instead of as code to run."""
import numpy as np
import pytest
import yaml

import core
from core.examples import branched_tree, branched_tree_spec, chain, chain_spec


def _chain_by_api(n, length=1.0, mass=1.0, gravity=9.8):
    """The construction chain() used before the specs (System API calls)."""
    s = core.System(gravity=[0.0, -gravity, 0.0], name=f"chain{n}")
    parent = "world"
    for i in range(n):
        s.add_frame(f"joint{i}", parent=parent, rz=f"theta{i}")
        s.add_frame(f"mass{i}", parent=f"joint{i}", ty=-length, mass=mass, inertia=[0.01, 0.01, 0.01])
        s.add_input("torque", config=f"theta{i}")
        parent = f"mass{i}"
    return s


def _tree_by_api(n_variables):
    """The construction branched_tree() used before the specs (System API calls)."""
    s = core.System(gravity=[0.0, 0.0, -9.81], name=f"tree{n_variables}")
    parent = "world"
    for i, kind in enumerate(["tx", "ty", "tz", "rz", "ry", "rx"]):
        name = "base" if i == 5 else f"base_{kind}"
        s.add_frame(name, parent=parent, mass=5.0 if i == 5 else 0.0,
                    inertia=[0.2, 0.3, 0.4] if i == 5 else None, **{kind: f"base_{kind}"})
        parent = name
    remaining = n_variables - 6
    corners = [[0.2, 0.1, 0.0], [-0.2, 0.1, 0.0], [0.2, -0.1, 0.0], [-0.2, -0.1, 0.0]]
    for limb in range(4):
        count = remaining // 4 + (1 if limb < remaining % 4 else 0)
        parent = "base"
        for j in range(count):
            kind = ("rx", "ry", "rz")[j % 3]
            name = f"limb{limb}_{j}"
            offset = {"translation": corners[limb] if j == 0 else [0.0, 0.0, -0.15],
                      "rotation": [0.1 * limb, 0.05 * j, 0.0]}
            s.add_frame(name, parent=parent, offset=offset, mass=0.5,
                        inertia=[[0.01, 0.001, 0.0], [0.001, 0.012, 0.0005], [0.0, 0.0005, 0.008]],
                        **{kind: name})
            s.add_input("torque", config=name)
            parent = name
    return s


@pytest.mark.parametrize("from_spec, by_api", [
    (lambda: chain(3), lambda: _chain_by_api(3)),
    (lambda: chain(2, 0.5, 2.0, 9.81), lambda: _chain_by_api(2, 0.5, 2.0, 9.81)),
    (lambda: core.load_system(yaml.safe_dump(chain_spec(3))), lambda: _chain_by_api(3)),
    (lambda: branched_tree(14), lambda: _tree_by_api(14)),
    (lambda: core.load_system(yaml.safe_dump(branched_tree_spec(14))), lambda: _tree_by_api(14)),
])
def test_spec_builds_the_system_of_the_api_construction(from_spec, by_api):
    a, b = from_spec(), by_api()
    assert (a.name, a.config_names, a.input_names) == (b.name, b.config_names, b.input_names)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q, dq, u = rng.standard_normal(a.nq), rng.standard_normal(a.nq), rng.standard_normal(a.nu)
        np.testing.assert_array_equal(a.qdd(q, dq, u), b.qdd(q, dq, u))
        for Ma, Mb in zip(a.linearize(q, dq, u), b.linearize(q, dq, u), strict=True):
            np.testing.assert_array_equal(Ma, Mb)


def test_specs_are_plain_yaml_data():
    for spec in (chain_spec(2), branched_tree_spec(40)):
        assert yaml.safe_load(yaml.safe_dump(spec)) == spec
    assert chain(3).nq == 3 and branched_tree(40).nq == 40
    with pytest.raises(ValueError, match="at least 10"):
        branched_tree_spec(9)
