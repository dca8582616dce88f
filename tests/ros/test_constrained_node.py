"""The node on a constrained model (the paper's constrained double pendulum, core/data/
double_pendulum.yaml) over real rclpy + DDS: continuous, minimal-coordinate and discrete
linearizations through the Linearize service equal the library's, and bad minimal requests are
answered with ``success: false`` while the node keeps serving."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import core

from nodeproc import FIRST_CALL_TIMEOUT, NodeProcess

# slow: starts a node process (it loads the numba kernels)
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "core", "data", "double_pendulum.yaml")
PARAMS_YAML = """\
/**/mechnode:
  ros__parameters:
    model: {model}
    dt: 0.01
    joint_map: ["theta1:joint1", "theta2:joint2"]
    Q: [10.0, 10.0, 1.0, 1.0]
    R: [0.1]
"""
# the paper's point (Sec. IV), velocity tangent to the constraint
Q0, DQ0, U0 = np.array([0.5246, 1.0472]), np.array([1.0, -2.00116]), np.array([2.0])


def _on_manifold():
    """The paper's printed q0 is 1e-3 off the constraint (h = -0.0035); minimal coordinates
    need an exact point: theta2 by Newton at the paper's theta1, dq tangent with dtheta1 = 1."""
    system = core.load_system(MODEL)
    q = Q0.copy()
    for _ in range(20):
        h, Dh = system.constraint(q, order=1)
        q[1] -= h[0] / Dh[0, 1]
    _, Dh = system.constraint(q, order=1)
    return q, np.array([1.0, -Dh[0, 0] / Dh[0, 1]])


QM, DQM = _on_manifold()


@pytest.fixture(scope="module")
def node(rclpy_mod, ifaces, tmp_path_factory):
    d = tmp_path_factory.mktemp("constrained")
    (d / "params.yaml").write_text(PARAMS_YAML.format(model=MODEL))
    h = NodeProcess(rclpy_mod, str(d / "params.yaml"), f"/test_constrained_{os.getpid()}",
                    d / "mechnode.log")
    try:
        assert h.bring_up()[-1] == "active"
        yield h
    finally:
        h.close()


def _arr(m):
    from mechnode.ros.conversions import matrix_from_msg
    return matrix_from_msg(m)


def _linearize(node, **fields):
    from mechnode_interfaces.srv import Linearize
    fields.setdefault("u", U0.tolist())
    # (the first request of a kind may wait for its kernel's compilation on a cold cache)
    return node.call(Linearize, "linearize", Linearize.Request(**fields), timeout=FIRST_CALL_TIMEOUT)


def test_continuous_and_minimal_linearizations_equal_the_library(node):
    system = core.load_system(MODEL)
    assert abs(system.constraint(QM)[0]) < 1e-12
    r = _linearize(node, q=QM.tolist(), dq=DQM.tolist())
    assert r.success, r.message
    A, B = system.linearize(QM, DQM, U0)
    np.testing.assert_allclose(_arr(r.a), A, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(_arr(r.b), B, rtol=1e-12, atol=1e-14)
    # (the paper's rows 3-4 of A are at its printed q0, 3.5 mm off the constraint: the node
    # refuses that state, see the next test; the library reproduces them with residual_limit=None
    # in tests/test_paper_continuous.py)
    for independent in ([], ["theta2"]):
        r = _linearize(node, q=QM.tolist(), dq=DQM.tolist(), minimal=True, independent=independent)
        assert r.success, r.message
        Am, Bm, info = system.linearize_minimal(QM, DQM, U0, independent=independent or None)
        assert _arr(r.a).shape == (2, 2) and _arr(r.b).shape == (2, 1)
        np.testing.assert_allclose(_arr(r.a), Am, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(_arr(r.b), Bm, rtol=1e-12, atol=1e-14)
        assert list(r.state_names) == list(info.state_names)
        assert "minimal coordinates: independent" in r.message
        if independent:
            assert list(r.state_names) == ["theta2", "dtheta2"]


def test_discrete_linearization_equals_the_library(node):
    vi = core.MidpointVI(core.load_system(MODEL), 0.01)
    p = vi.momentum(QM, DQM)         # on the constraint (the paper's printed q0 is 1e-3 off)
    r = _linearize(node, q=QM.tolist(), p=p.tolist(), discrete=True, order=1)
    assert r.success, r.message
    A, B = vi.linearize(vi.state(QM, p), U0)
    np.testing.assert_allclose(_arr(r.a), A, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(_arr(r.b), B, rtol=1e-12, atol=1e-14)


def test_off_manifold_linearize_requests_are_refused_with_the_reason(node):
    """A state off the constraints is not linearized silently (issue 19, item 3): the paper's
    printed q0 (h = -0.0035), a larger violation, and a velocity not tangent to the constraint
    give success: false naming the constraint row and the residual; the node keeps serving."""
    cases = [
        (dict(q=Q0.tolist(), dq=DQ0.tolist()), r"holonomic constraint row 0: h = -0\.003"),
        (dict(q=[0.5246, 1.2], dq=DQ0.tolist()), r"holonomic constraint row 0: h = "),
        (dict(q=QM.tolist(), dq=(DQM + [0.0, 0.1]).tolist()),
         r"dq violates holonomic constraint row 0 at velocity level: residual "),
    ]
    for fields, pattern in cases:
        for minimal in (False, True):
            r = _linearize(node, minimal=minimal, **fields)
            assert not r.success, (fields, minimal)
            assert re.search(pattern, r.message) and "constraint manifold" in r.message, r.message
    ok = _linearize(node, q=QM.tolist(), dq=DQM.tolist())
    assert ok.success, ok.message
    # the discrete linearization too: its configuration q_k must be on the constraints
    r = _linearize(node, q=Q0.tolist(), p=[0.0, 0.0], discrete=True)
    assert not r.success and re.search(r"holonomic constraint row 0: h = -0\.003", r.message), r.message
    assert "the discrete linearization needs a state on the constraint manifold" in r.message
    ok = _linearize(node, q=QM.tolist(), p=[0.0, 0.0], discrete=True)
    assert ok.success, ok.message


@pytest.mark.parametrize("fields, reason", [
    (dict(minimal=True, independent=["nonexistent"]), "nonexistent"),
    (dict(minimal=True, q=Q0.tolist()), "constraint manifold"),   # the paper's q0 is 1e-3 off
    (dict(minimal=True, discrete=True, p=[0.0, 0.0]), "continuous"),
    (dict(minimal=True, dq=[1.0]), "dq"),
])
def test_bad_minimal_requests_are_refused_and_the_node_keeps_serving(node, fields, reason):
    fields = dict(fields)
    fields.setdefault("q", QM.tolist())
    if not fields.get("discrete"):
        fields.setdefault("dq", DQM.tolist())
    r = _linearize(node, **fields)
    assert not r.success and reason in r.message, r.message
    ok = _linearize(node, q=QM.tolist(), dq=DQM.tolist(), minimal=True)
    assert ok.success, ok.message
