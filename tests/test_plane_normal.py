"""A plane constraint with any normal vector (trep's point-on-plane): the same dynamics as the
plane written with a rotated frame by hand, exact derivatives (central differences), and clear
errors for a bad normal."""
from __future__ import annotations

import numpy as np
import pytest

import core


def _point(normal, plane_offset=None):
    """A 1 kg point on three sliders, a pendulum hanging from it, the point held on a plane."""
    s = core.System(name="point_on_plane")
    s.add_frame("X", tx="x")
    s.add_frame("Y", parent="X", ty="y")
    s.add_frame("Z", parent="Y", tz="z", mass=1.0, inertia=[0.01, 0.01, 0.01])
    s.add_frame("arm", parent="Z", ry="theta")
    s.add_frame("bob", parent="arm", tz=-0.5, mass=0.3, inertia=[0.001, 0.002, 0.003])
    s.add_input("torque", config="x", name="fx")
    s.add_input("torque", config="theta", name="tau")
    if plane_offset is not None:
        s.add_frame("plane", offset={"rotation": plane_offset})
        s.add_constraint("plane", frame="Z", plane_frame="plane", normal="z", offset=0.1)
    else:
        s.add_constraint("plane", frame="Z", normal=normal, offset=0.1)
    return s


N = np.array([1.0, 2.0, 2.0])          # |N| = 3


def _rotation_z_to(n):
    z = n / np.linalg.norm(n)
    x = np.cross([1.0, 0.0, 0.0], z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def _state(s):
    q = np.array([0.3, -0.2, 0.0, 0.4])
    q = core.satisfy_constraints(s, q, fixed=["x", "y", "theta"])
    dq = core.project_velocity(s, q, [0.2, -0.1, 0.0, 0.5], fixed=["x", "y", "theta"])
    return q, dq


def test_a_vector_normal_is_the_plane_of_a_rotated_frame():
    a, b = _point(N), _point(None, plane_offset=_rotation_z_to(N))
    q, dq = _state(a)
    assert abs(N @ q[:3] / 3 - 0.1) < 1e-12       # on the plane n . p = offset
    u = np.array([0.7, -0.2])
    assert np.allclose(a.qdd(q, dq, u), b.qdd(q, dq, u), rtol=0, atol=1e-12)
    A1, B1 = a.linearize(q, dq, u)
    A2, B2 = b.linearize(q, dq, u)
    assert np.allclose(A1, A2, atol=1e-11) and np.allclose(B1, B2, atol=1e-11)
    assert "world@plane0" in a.frame_names


def test_derivatives_of_the_vector_normal_plane_by_central_differences():
    s = _point(N)
    q, dq = _state(s)
    u = np.array([0.7, -0.2])
    A, B = s.linearize(q, dq, u, residual_limit=None)
    n, eps = s.nq, 1e-6
    for j in range(2 * n):
        e = np.zeros(2 * n)
        e[j] = eps
        xp, xm = np.concatenate([q, dq]) + e, np.concatenate([q, dq]) - e
        fp = np.concatenate([xp[n:], s.qdd(xp[:n], xp[n:], u)])
        fm = np.concatenate([xm[n:], s.qdd(xm[:n], xm[n:], u)])
        assert np.allclose(A[:, j], (fp - fm) / (2 * eps), atol=1e-6), j
    for j in range(2):
        e = np.zeros(2)
        e[j] = eps
        fd = (s.qdd(q, dq, u + e) - s.qdd(q, dq, u - e)) / (2 * eps)
        assert np.allclose(B[n:, j], fd, atol=1e-7)


@pytest.mark.parametrize("normal", [[0, 0, 0], [1, 2], [1, np.nan, 0], "w"])
def test_a_bad_normal_is_refused_naming_it(normal):
    with pytest.raises(core.errors.ModelError, match=r"constraint 0 \(plane\)\.normal"):
        _point(normal if not isinstance(normal, list) else np.array(normal, dtype=float)).compile()
