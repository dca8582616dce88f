"""The quaternion floating base (a free-flyer, Pinocchio's ``JointModelFreeFlyer``): its
configuration algebra and the dynamics in its tangent space.

Conventions (Pinocchio's, written once here and in :mod:`core.conventions`):

* configuration ``q = [x, y, z, qx, qy, qz, qw, q_joints]``: the base frame's origin in world
  coordinates and its orientation as a unit quaternion (scalar last), ``R(quat)`` mapping base
  to world coordinates; ``nq = nv + 1``;
* velocity ``v = [vx, vy, vz, wx, wy, wz, dq_joints]``: the base's spatial velocity in its own
  frame (Pinocchio's ``LOCAL``): ``(vx, vy, vz) = Rᵀ ṗ`` and ``(wx, wy, wz) = ω`` with
  ``Rᵀ Ṙ = ω^``;
* :func:`integrate` ``q ⊕ v``: the base pose ``g exp(v^)`` (the SE(3) exponential, in the base
  frame), the joints ``q + v``; :func:`difference` ``q1 ⊖ q0 = log(g0⁻¹ g1)`` (and ``q1 - q0``),
  so that ``q0 ⊕ (q1 ⊖ q0) = q1``;
* tangent derivatives: ``d/dδ`` at ``q ⊕ δ``, ``δ = 0`` — Pinocchio's ``ddq_dq``. The state's
  linearization is that of the error ``δ = x ⊖ x̄``, ``Δv = v - v̄`` about a motion ``x̄(t)``::

      d/dt δ  = Δv - ad(v̄) δ + ½ ad(δ) Δv + O(3)      (on the base; Δv on the joints)
      d/dt Δv = a(x̄ ⊕ δ, v, u) - a(x̄, v̄, ū)

  so ``A = [[-ad(v̄), I], [da/dδ, da/dv]]`` is ``2 nv x 2 nv`` (``-ad(v̄)`` on the base block, zero
  on the joints) and ``B = [[0], [da/du]]``.

How (no new kernels): the dynamics are invariant under rigid motions of the world, so at every
evaluation the base is put at the origin with identity orientation, gravity turned into the base
frame (``Rᵀ g``), and carried by a chart of six single-axis joints — translations along and
rotations about the base's own x, y, z (:data:`CHART_KINDS`) — evaluated at zero, where it is
regular. The chart's velocities there are the base twist, its accelerations differ from ``v̇``
by the chart's curvature ``Γ(v) = Σ_(i<k) [e_i, e_k] v_i v_k``, and its derivatives map to the
tangent space through the chart's Taylor coefficients at zero, which are constants (nested Lie
brackets of the unit twists ``e_i``: :class:`_Chart`). The tree kernels run on the chart system;
only ``O(nv)`` work (``O(nv²)`` for the second order) is added here. The Euler chart
(``root_yaw, root_pitch, root_roll``) is singular at pitch ±90°; this one never is.
"""
from __future__ import annotations

import math

import numpy as np

from core.base.jit import njit

#: The chart's transforms, in order from the world: translations along, then rotations about,
#: the base's own axes.
CHART_KINDS = ("tx", "ty", "tz", "rx", "ry", "rz")
#: Suffixes of the base's configuration and velocity names.
CONFIG_SUFFIXES = ("x", "y", "z", "qx", "qy", "qz", "qw")
VELOCITY_SUFFIXES = ("vx", "vy", "vz", "wx", "wy", "wz")
#: A quaternion whose norm differs from 1 by more than this is refused (else normalized).
QUATERNION_TOLERANCE = 1e-6


# ------------------------------------------------------------------------------ SO(3), SE(3)
def skew(w) -> np.ndarray:
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def quaternion_matrix(quat) -> np.ndarray:
    """The rotation of the unit quaternion ``(x, y, z, w)``."""
    x, y, z, w = quat
    return quaternion_rotation(float(x), float(y), float(z), float(w))


@njit(cache=True, nogil=True)
def quaternion_rotation(x, y, z, w):
    """:func:`quaternion_matrix` of ``(x, y, z, w)`` (for kernels)."""
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def quaternion_product(a, b) -> np.ndarray:
    """Hamilton product ``a b`` of quaternions ``(x, y, z, w)`` (the rotation ``R(a) R(b)``)."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz])


def _exp3_quaternion(w) -> np.ndarray:
    theta = math.sqrt(w @ w)
    half = 0.5 * theta
    s = 0.5 - theta * theta / 48.0 if theta < 1e-6 else math.sin(half) / theta
    return np.array([s * w[0], s * w[1], s * w[2], math.cos(half)])


def _log3_quaternion(quat) -> np.ndarray:
    """The rotation vector of a unit quaternion, angle in [0, π] (the shorter way)."""
    x, y, z, w = quat
    if w < 0.0:
        x, y, z, w = -x, -y, -z, -w
    s = math.sqrt(x * x + y * y + z * z)
    theta = 2.0 * math.atan2(s, w)
    k = 2.0 / w * (1.0 + s * s / (3.0 * w * w)) if s < 1e-6 else theta / s
    return np.array([k * x, k * y, k * z])


def _left_jacobian(w) -> np.ndarray:
    """``V(w) = I + (1 - cos θ)/θ² w^ + (θ - sin θ)/θ³ w^²`` (``p = V v`` in ``exp6``)."""
    t2 = w @ w
    t = math.sqrt(t2)
    if t < 1e-4:
        a, b = 0.5 - t2 / 24.0, 1.0 / 6.0 - t2 / 120.0
    else:
        a, b = (1.0 - math.cos(t)) / t2, (t - math.sin(t)) / (t2 * t)
    W = skew(w)
    return np.eye(3) + a * W + b * (W @ W)


def _left_jacobian_inverse(w) -> np.ndarray:
    t2 = w @ w
    t = math.sqrt(t2)
    c = 1.0 / 12.0 + t2 / 720.0 if t < 1e-4 else (1.0 - 0.5 * t / math.tan(0.5 * t)) / t2
    W = skew(w)
    return np.eye(3) - 0.5 * W + c * (W @ W)


def ad(V) -> np.ndarray:
    """``ad(V)`` of the twist ``V = (v, ω)``: ``ad(V) U = [V, U] = (ω × u - ω_U × v, ω × ω_U)``."""
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = skew(V[3:])
    out[:3, 3:] = skew(V[:3])
    return out


# ------------------------------------------------------------------------------ configurations
def base_quaternion(q, names) -> np.ndarray:
    """The unit quaternion of ``q`` (``q[3:7]``), normalized; a :class:`ValueError` naming it
    when its norm is off 1 by more than :data:`QUATERNION_TOLERANCE`."""
    quat = q[3:7]
    norm = math.sqrt(float(quat @ quat))
    if not abs(norm - 1.0) <= QUATERNION_TOLERANCE:
        raise ValueError(f"q: the base quaternion ({', '.join(names[3:7])}) = {quat.tolist()} is not a unit "
                         f"quaternion (norm {norm:.9g}); normalize it (System.integrate keeps it unit, "
                         "System.neutral is the identity)")
    return quat / norm


def integrate(q, v) -> np.ndarray:
    """``q ⊕ v``: the base pose ``g exp(v^)``, the joints ``q + v`` (see the module docstring)."""
    out = np.empty(q.shape[0])
    R = quaternion_matrix(q[3:7])
    dq = _exp3_quaternion(v[3:6])
    out[:3] = q[:3] + R @ (_left_jacobian(v[3:6]) @ v[:3])
    quat = quaternion_product(q[3:7], dq)
    out[3:7] = quat / math.sqrt(quat @ quat)
    out[7:] = q[7:] + v[6:]
    return out


def difference(q0, q1) -> np.ndarray:
    """``q1 ⊖ q0``: the base ``log(g0⁻¹ g1)``, the joints ``q1 - q0`` (see the module docstring).

    In scalar arithmetic (it is on the node's command path): the rotation vector
    ``w = log(quat0⁻¹ quat1)`` (:func:`_log3_quaternion`), then ``V(w)⁻¹ R0ᵀ (p1 - p0)`` with
    ``V(w)⁻¹ t = t - ½ w × t + c w × (w × t)`` (:func:`_left_jacobian_inverse`)."""
    out = np.empty(q0.shape[0] - 1)
    px0, py0, pz0, x0, y0, z0, w0 = q0[:7].tolist()
    px1, py1, pz1, x1, y1, z1, w1 = q1[:7].tolist()
    # quat0⁻¹ quat1 (Hamilton product of the conjugate), then its logarithm
    x = w0 * x1 - x0 * w1 - y0 * z1 + z0 * y1
    y = w0 * y1 + x0 * z1 - y0 * w1 - z0 * x1
    z = w0 * z1 - x0 * y1 + y0 * x1 - z0 * w1
    w = w0 * w1 + x0 * x1 + y0 * y1 + z0 * z1
    if w < 0.0:
        x, y, z, w = -x, -y, -z, -w
    s = math.sqrt(x * x + y * y + z * z)
    k = 2.0 / w * (1.0 + s * s / (3.0 * w * w)) if s < 1e-6 else 2.0 * math.atan2(s, w) / s
    wx, wy, wz = k * x, k * y, k * z
    # R0ᵀ (p1 - p0)
    dx, dy, dz = px1 - px0, py1 - py0, pz1 - pz0
    tx = (1 - 2 * (y0 * y0 + z0 * z0)) * dx + 2 * (x0 * y0 + z0 * w0) * dy + 2 * (x0 * z0 - y0 * w0) * dz
    ty = 2 * (x0 * y0 - z0 * w0) * dx + (1 - 2 * (x0 * x0 + z0 * z0)) * dy + 2 * (y0 * z0 + x0 * w0) * dz
    tz = 2 * (x0 * z0 + y0 * w0) * dx + 2 * (y0 * z0 - x0 * w0) * dy + (1 - 2 * (x0 * x0 + y0 * y0)) * dz
    # V(w)⁻¹ t
    t2 = wx * wx + wy * wy + wz * wz
    t = math.sqrt(t2)
    c = 1.0 / 12.0 + t2 / 720.0 if t < 1e-4 else (1.0 - 0.5 * t / math.tan(0.5 * t)) / t2
    cx, cy, cz = wy * tz - wz * ty, wz * tx - wx * tz, wx * ty - wy * tx          # w × t
    ccx, ccy, ccz = wy * cz - wz * cy, wz * cx - wx * cz, wx * cy - wy * cx       # w × (w × t)
    out[0], out[1], out[2] = tx - 0.5 * cx + c * ccx, ty - 0.5 * cy + c * ccy, tz - 0.5 * cz + c * ccz
    out[3], out[4], out[5] = wx, wy, wz
    out[6:] = q1[7:] - q0[7:]
    return out


# ------------------------------------------------------------------------------ the chart
def _jet_product(A, B, sa: str, sb: str, so: str, second: bool):
    """The jet (value, gradient, Hessian over the last axes) of the product of jets ``A`` and
    ``B`` whose values multiply as ``einsum(f"{sa},{sb}->{so}")`` (lower-case subscripts)."""
    v = np.einsum(f"{sa},{sb}->{so}", A[0], B[0])
    g = np.einsum(f"{sa}Y,{sb}->{so}Y", A[1], B[0]) + np.einsum(f"{sa},{sb}Y->{so}Y", A[0], B[1])
    if not second:
        return v, g, None
    cross = np.einsum(f"{sa}Y,{sb}Z->{so}YZ", A[1], B[1])
    h = (np.einsum(f"{sa}YZ,{sb}->{so}YZ", A[2], B[0]) + np.einsum(f"{sa},{sb}YZ->{so}YZ", A[0], B[2])
         + cross + np.swapaxes(cross, -1, -2))
    return v, g, h


class _Chart:
    """The chart ``g(ξ) = exp(ξ_0 ê_0) ... exp(ξ_5 ê_5)`` around zero, as jets (value,
    gradient, Hessian) over the twelve variables ``(δ, v)`` of the base, ``q = exp(δ^)``:

    * ``xi``: ``ξ(δ) = δ - ½ Σ_(i<k) δ_i δ_k [e_i, e_k]`` (BCH, to second order);
    * ``J``: the body Jacobian ``V = J(ξ) ξ̇``, column ``i`` ``= E_5 ... E_(i+1) e_i`` with
      ``E_m = exp(-ξ_m ad(e_m))``; ``J_inv`` its inverse (``I - N + N²``, ``N = J - I``);
    * ``T[:, m, i]`` (``m > i``): ``dJ/dt ξ̇ = Σ_(i<m) ξ̇_i ξ̇_m T[:, m, i]``, with
      ``T[:, m, i] = -E_5 ... E_(m+1) ad(e_m) E_m ... E_(i+1) e_i``.

    All are constants: the chart is always centred at the current configuration."""

    def __init__(self):
        e = np.eye(6)
        self.ad = np.array([ad(e[i]) for i in range(6)])
        # ξ: gradient [I, 0] over (δ, v), Hessian -½ [e_min, e_max] off the diagonal
        xi_g = np.zeros((6, 12))
        xi_g[:, :6] = np.eye(6)
        xi_h = np.zeros((6, 12, 12))
        for i in range(6):
            for k in range(i + 1, 6):
                xi_h[:, i, k] = xi_h[:, k, i] = -0.5 * (self.ad[i] @ e[k])
        self.xi = (np.zeros(6), xi_g, xi_h)
        # E_m = I - ξ_m ad_m + ½ ξ_m² ad_m² (exact to second order: ξ = 0 here)
        E = []
        for m in range(6):
            a = self.ad[m]
            g = -np.einsum("ij,k->ijk", a, xi_g[m])
            h = (-np.einsum("ij,kl->ijkl", a, xi_h[m])
                 + np.einsum("ij,k,l->ijkl", a @ a, xi_g[m], xi_g[m]))
            E.append((np.eye(6), g, h))
        ident = (np.eye(6), np.zeros((6, 6, 12)), np.zeros((6, 6, 12, 12)))
        # P[i] = E_5 ... E_(i+1); R[m][i] = E_m ... E_(i+1)
        P = [None] * 6
        P[5] = ident
        for i in range(4, -1, -1):
            P[i] = _jet_product(P[i + 1], E[i + 1], "ij", "jk", "ik", True)
        J = [np.zeros((6, 6)), np.zeros((6, 6, 12)), np.zeros((6, 6, 12, 12))]
        for i in range(6):
            for part in range(3):
                J[part][:, i] = P[i][part][:, i]
        self.J = tuple(J)
        N = (np.zeros((6, 6)), J[1], J[2])
        NN = _jet_product(N, N, "ij", "jk", "ik", True)
        self.J_inv = (np.eye(6), -J[1] + NN[1], -J[2] + NN[2])
        T = [np.zeros((6, 6, 6)), np.zeros((6, 6, 6, 12)), np.zeros((6, 6, 6, 12, 12))]
        for m in range(1, 6):
            R = E[m]                            # R = E_m ... E_(i+1), grown as i falls
            for i in range(m - 1, -1, -1):
                if i < m - 1:
                    R = _jet_product(R, E[i + 1], "ij", "jk", "ik", True)
                x = tuple(-np.einsum("ij,j...->i...", self.ad[m], part[:, i]) for part in R)
                y = _jet_product(P[m], x, "ij", "j", "i", True)
                for part in range(3):
                    T[part][:, m, i] = y[part]
        self.T = tuple(T)
        # first-order contractions as matrices (:func:`tangent_map`, :func:`_velocity_gradient`)
        self.Jinv_q = np.ascontiguousarray(self.J_inv[1][:, :, :6].transpose(0, 2, 1).reshape(36, 6))
        self.T1 = np.ascontiguousarray(T[1].transpose(0, 3, 1, 2).reshape(72, 36))
        self.T0_sym = np.ascontiguousarray(T[0] + T[0].transpose(0, 2, 1))
        self.J1 = np.ascontiguousarray(J[1].transpose(0, 2, 1).reshape(72, 6))


#: The chart's constants, made at import (4 ms): :func:`tangent_map` takes the first-order ones
#: as compile-time constants.
_CHART = _Chart()
_JINV_Q, _T1, _T0_SYM, _J1 = _CHART.Jinv_q, _CHART.T1, _CHART.T0_sym, _CHART.J1


def chart() -> _Chart:
    return _CHART


# ------------------------------------------------------------------------------ tangent space
def _velocity_jets(vb, second: bool):
    """``ξ̇ = J⁻¹ v`` and ``G = J̇ ξ̇`` as jets over the base's ``(δ, v)`` at ``(0, vb)``."""
    c = chart()
    g = np.zeros((6, 12))
    g[:, 6:] = np.eye(6)
    v = (vb, g, np.zeros((6, 12, 12)) if second else None)
    J_inv = c.J_inv if second else c.J_inv[:2] + (None,)
    xd = _jet_product(J_inv, v, "ij", "j", "i", second)
    S = _jet_product(xd, xd, "m", "i", "mi", second)
    T = c.T if second else c.T[:2] + (None,)
    return xd, _jet_product(T, S, "bmi", "mi", "b", second)


def _velocity_gradient(vb):
    """``Dq = dξ̇/dδ`` at the chart's zero (``dξ̇/dv = I``): :func:`_velocity_jets`' first order."""
    return (_JINV_Q @ vb).reshape(6, 6)


@njit(cache=True, nogil=True, inline="always")
def _minus_skew(A, r, c, x0, x1, x2):
    """``A[r:r+3, c:c+3] = -x^`` (the diagonal left as it is: zero)."""
    A[r, c + 1], A[r, c + 2] = x2, -x1
    A[r + 1, c], A[r + 1, c + 2] = -x2, x0
    A[r + 2, c], A[r + 2, c + 1] = x1, -x0


@njit(cache=True, nogil=True)
def tangent_map(Ac, Bc, F, vb, A, B):
    """``(A, B)`` of :func:`linearize` written in place, from the chart's linearization
    ``(Ac, Bc)`` at zero and its accelerations ``F``: :func:`tangent_derivatives` and
    :func:`state_rows` to first order, with the chart's constants compiled in. In scalar loops:
    the dozen small array operations this replaces cost more than the sums."""
    Jinv_q, T1, T0_sym, J1 = _JINV_Q, _T1, _T0_SYM, _J1
    n = F.shape[0]
    m = Bc.shape[1]
    Dq = np.empty((6, 6))                       # dξ̇/dδ = Jinv_q v
    for r in range(36):
        s = 0.0
        for k in range(6):
            s += Jinv_q[r, k] * vb[k]
        Dq[r // 6, r % 6] = s
    S = np.empty(36)                            # v v^T, flat
    for a in range(6):
        for b in range(6):
            S[6 * a + b] = vb[a] * vb[b]
    # d δ / dt = [-ad(v) on the base, I]
    A[:n, :] = 0.0
    B[:n, :] = 0.0
    for i in range(n):
        A[i, n + i] = 1.0
    _minus_skew(A, 0, 0, vb[3], vb[4], vb[5])   # -ad(v) = -[[ω^, v^], [0, ω^]]
    _minus_skew(A, 3, 3, vb[3], vb[4], vb[5])
    _minus_skew(A, 0, 3, vb[0], vb[1], vb[2])
    # accelerations: the chart's gradient, ξ̇'s dependence on δ through J⁻¹
    for i in range(n):
        for k in range(2 * n):
            A[n + i, k] = Ac[n + i, k]
        for r in range(m):
            B[n + i, r] = Bc[n + i, r]
        for k in range(6):
            s = 0.0
            for j in range(6):
                s += Ac[n + i, n + j] * Dq[j, k]
            A[n + i, k] += s
    # base rows: + (J1 F)(12) + G1, G1 = T1 S + (T0_sym v) [Dq, I], on (δ_base, v_base)
    Tv = np.empty(6)
    for b in range(6):
        for mm in range(6):
            s = 0.0
            for k in range(6):
                s += T0_sym[b, mm, k] * vb[k]
            Tv[mm] = s
        for col in range(12):
            row = 12 * b + col
            s = 0.0
            for k in range(6):
                s += J1[row, k] * F[k]
            for k in range(36):
                s += T1[row, k] * S[k]
            if col < 6:
                for mm in range(6):
                    s += Tv[mm] * Dq[mm, col]
                A[n + b, col] += s
            else:
                A[n + b, n + col - 6] += s + Tv[col - 6]


def curvature(vb) -> np.ndarray:
    """``Γ(v) = J̇ ξ̇`` at the chart's zero: ``v̇ = ξ̈ + Γ(v)`` on the base."""
    return np.einsum("bmi,m,i->b", chart().T[0], vb, vb)


def _blocks(n: int):
    """The z indices of the base's twelve jet variables ``(δ_base, v_base)``."""
    return (slice(0, 6), slice(n, n + 6))


def _add12(target, values, n: int, axis: int) -> None:
    """``target[..., B, ...] += values`` along ``axis`` (B: the twelve base indices of z)."""
    for half, block in enumerate(_blocks(n)):
        index = [slice(None)] * target.ndim
        index[axis] = block
        src = [slice(None)] * values.ndim
        src[axis] = slice(6 * half, 6 * half + 6)
        target[tuple(index)] += values[tuple(src)]


def tangent_derivatives(F, Fz, HF, v, n: int):
    """``(a, da/dz, d²a/dz²)`` of the accelerations in the tangent space, ``z = [δ, v, u]``, from
    the chart's ``F = ξ̈`` at zero, its gradient ``Fz`` over ``z' = [ξ, ξ̇, u]`` (n x nz) and
    Hessian ``HF`` (n x nz x nz): ``a = J(ξ) F(ξ, J⁻¹ v, u) + J̇ ξ̇`` with ``ξ = ξ(δ)`` composed to
    second order (the module docstring; the first order alone is :func:`tangent_map`)."""
    c = chart()
    xd, G = _velocity_jets(v[:6], True)
    a = F.copy()
    a[:6] += G[0]
    Dq = xd[1][:, :6]                       # dξ̇/dδ (dξ̇/dv = I)
    grad = Fz.copy()
    grad[:, :6] += Fz[:, n:n + 6] @ Dq
    hess = HF.copy()
    t = np.einsum("iaw,wk->iak", HF[:, :, n:n + 6], Dq)
    hess[:, :, :6] += t
    hess[:, :6, :] += t.transpose(0, 2, 1)
    hess[:, :6, :6] += np.einsum("wk,iwx,xl->ikl", Dq, HF[:, n:n + 6, n:n + 6], Dq)
    # Σ_c F'_c φ''_c: ξ'' and ξ̇'' live on the twelve base variables
    curv = np.einsum("ic,ckl->ikl", Fz[:, :6], c.xi[2]) + np.einsum("ic,ckl->ikl", Fz[:, n:n + 6], xd[2])
    for hk, bk in enumerate(_blocks(n)):
        for hl, bl in enumerate(_blocks(n)):
            hess[:, bk, bl] += curv[:, 6 * hk:6 * hk + 6, 6 * hl:6 * hl + 6]
    # base rows: J(ξ) F + J̇ ξ̇ (J = I at zero)
    Fb = F[:6]
    base_g = np.einsum("bik,i->bk", c.J[1], Fb) + G[1]
    base_h = np.einsum("bikl,i->bkl", c.J[2], Fb) + G[2]
    X = np.einsum("bik,ia->bka", c.J[1], grad[:6])          # (6, 12, nz), from F∘φ's gradient
    cross = np.zeros((6, hess.shape[1], hess.shape[2]))
    _add12(cross, X, n, 1)
    cross += cross.transpose(0, 2, 1)
    hess[:6] += cross
    for hk, bk in enumerate(_blocks(n)):
        for hl, bl in enumerate(_blocks(n)):
            hess[:6, bk, bl] += base_h[:, 6 * hk:6 * hk + 6, 6 * hl:6 * hl + 6]
    _add12(grad[:6], base_g, n, 1)
    return a, grad, hess


def state_rows(vb, n: int, nz: int):
    """The rows of ``d/dt δ`` (``n`` of them): ``(A_top, H_top)`` with ``A_top = [-ad(v̄) on the
    base, I]`` (n x 2n) and ``H_top[b, δ_k, v_m] = ½ [e_k, e_m]_b`` (see the module docstring)."""
    A = np.zeros((n, 2 * n))
    A[:, n:] = np.eye(n)
    A[:6, :6] = -ad(vb)
    H = np.zeros((n, nz, nz))
    half = 0.5 * chart().ad                      # ad[k] e_m = [e_k, e_m]
    block = np.transpose(half, (1, 0, 2))        # [b, k, m]
    H[:6, :6, n:n + 6] = block
    H[:6, n:n + 6, :6] = np.transpose(block, (0, 2, 1))
    return A, H


# ------------------------------------------------------------------------------ the system
def refuse(system, what: str, contacts: bool = True) -> None:
    """A :class:`~core.errors.ModelError` for ``what``, a computation on coordinates with ``nq ==
    nv`` (and with ``contacts``, one that does not place them), when ``system`` has a quaternion
    base (or contacts, :mod:`core.continuous.contacts`); nothing otherwise."""
    from core.errors import ModelError
    if contacts and system.model is not None and system._contact_rows and not system._free_flyer:
        raise ModelError(f"{what}: not available with contacts (System.add_contact) yet; a system with "
                         "contacts has qdd, constraint_forces, contact_wrenches, linearize and linearize2")
    if system._free_flyer:
        raise ModelError(f"{what}: not available with a quaternion floating base (frame "
                         f"{system._free_flyer[0]!r}); a system with one has qdd, linearize, linearize2, "
                         "momentum, energy, input_matrix, integrate and difference. For the integrator, "
                         "the equilibria and the node, load the URDF with floating_base='euler' (a chart of "
                         "six coordinates, singular at pitch ±90°)")


def chart_system(system):
    """The plain system that :meth:`core.System.compile` evaluates for a quaternion base: the
    same description, the free-flyer frame carried by the six chart frames of
    :data:`CHART_KINDS` (named ``<frame>@chart_<kind>``) driven by the base's velocity names.
    Refuses what the base's frame cannot carry (see :meth:`core.System.set_free_flyer`)."""
    import copy

    from core.errors import ModelError
    from core.model.record import WORLD
    frame, prefix = system._free_flyer
    where = f"free flyer {frame!r}"
    frames = {f["name"]: f for f in system._frames}
    if frame not in frames:
        raise ModelError(f"{where}: unknown frame")
    f = frames[frame]
    if f["parent"] != WORLD or f["kind"] is not None:
        raise ModelError(f"{where}: the floating frame must be a root (parent 'world') without a transform of "
                         f"its own, got parent {f['parent']!r} and transform {f['kind']!r}")
    others = [g["name"] for g in system._frames if g["parent"] == WORLD and g["name"] != frame]
    if others:
        raise ModelError(f"{where}: frame(s) {others} hang from the world; with a floating base every frame "
                         "must descend from the floating frame")
    if system._constraints or system._velocity_constraints:
        raise ModelError(f"{where}: constraints other than contacts (System.add_contact) are not supported "
                         "with a quaternion floating base (use the Euler chart, floating_base='euler')")
    if system._kinematic:
        raise ModelError(f"{where}: kinematic variables are not supported with a quaternion floating base")
    velocities = [f"{prefix}_{x}" for x in VELOCITY_SUFFIXES]
    names = velocities + [f"{prefix}_{x}" for x in CONFIG_SUFFIXES]
    used = [n for n in names if any(g["value"] == n for g in system._frames)
            or n in system._damping or n in system._armature or n in system._locked or n in system._mimic
            or any(s.get("config") == n for s in system._springs)]
    if used:
        raise ModelError(f"{where}: the base's names {used} are taken by other elements")
    chart = copy.copy(system)
    chart._free_flyer, chart._chart, chart._model, chart._workspace = None, None, None, None
    chart._anchors_from_base = True         # (its contacts' rows are placed by the base's calls)
    parent = WORLD
    extra = []
    for kind, var in zip(CHART_KINDS, velocities, strict=True):
        name = f"{frame}@chart_{kind}"
        extra.append(dict(name=name, parent=parent, kind=kind, value=var, mass=0.0, inertia=np.zeros((3, 3)),
                          com=np.zeros(3), offset_R=np.eye(3), offset_p=np.zeros(3)))
        parent = name
    chart._frames = extra + [dict(g, parent=parent) if g["name"] == frame else g for g in system._frames]
    return chart


def configuration(system, q) -> np.ndarray:
    """``q`` checked (length, finite, a unit quaternion, normalized)."""
    from core.validation import check_vector
    names = system._config_names
    q = check_vector("q", q, system.nq, names).copy()
    q[3:7] = base_quaternion(q, names)
    return q


def _evaluation(system, q, v, u, third_order: bool = False):
    """``(chart, q_chart, v, u)`` with the chart's gravity turned into the base frame (``Rᵀ g``)
    in the scratch the evaluation uses (the caller places the contacts' rows first,
    :func:`core.continuous.contacts.place`)."""
    from core.validation import check_vector
    q = configuration(system, q)
    chart = system._chart
    v = check_vector("v", v, system.nv, chart._config_names)
    u = check_vector("u", np.zeros(system.nu) if u is None else u, system.nu, chart._input_names)
    g = quaternion_matrix(q[3:7]).T @ system.gravity
    for third in (False, True) if third_order else (False,):
        chart.workspace.get(third_order=third)[0].gravity[:] = g
    return chart, np.concatenate([np.zeros(6), q[7:]]), v, u


def qdd(system, q, v, u=None) -> np.ndarray:
    """``dv/dt``: the chart's accelerations plus its curvature on the base."""
    chart, qc, v, u = _evaluation(system, q, v, u)
    a = chart.qdd(qc, v, u)
    a[:6] += curvature(v[:6])
    return a


def linearize(system, q, v, u=None, residual_limit=None, multipliers: bool = False):
    """``(A, B)`` in the tangent space (the module docstring); with contacts the state must
    satisfy them to within ``residual_limit`` (None skips the check). With ``multipliers`` also
    ``dlam/dx`` and ``dlam/du`` of the contacts' multipliers: the chart's, ``ξ̇ = J⁻¹(ξ(δ)) v``
    composed to first order (``dξ/dδ = I``, ``dξ̇/dv = I`` at zero)."""
    from core.continuous.dynamics import dynamics_and_derivatives
    evaluated, qc, v, u = _evaluation(system, q, v, u)
    n, m = system.nv, system.nu
    F, _, Ac, Bc, dlam = dynamics_and_derivatives(evaluated, qc, v, u, True, residual_limit,
                                                  "the linearization")     # (ddq and A, B in one evaluation)
    A, B = np.empty((2 * n, 2 * n)), np.empty((2 * n, m))
    tangent_map(Ac, Bc, F, v[:6], A, B)
    if not multipliers:
        return A, B
    dlam = dlam.copy()
    dlam[:, :6] += dlam[:, n:n + 6] @ _velocity_gradient(v[:6])
    return A, B, dlam[:, :2 * n], dlam[:, 2 * n:]


def linearize2(system, q, v, u=None, residual_limit=None):
    """``(A, B, H)`` in the tangent space, ``H[i, a, b] = d² ẋ_i / dz_a dz_b`` with ``z = [δ, v,
    u]`` and ``ẋ = [dδ/dt, dv/dt]`` (the module docstring)."""
    chart, qc, v, u = _evaluation(system, q, v, u, third_order=True)
    n, m = system.nv, system.nu
    Ac, Bc, Hc = chart.linearize2(qc, v, u, residual_limit=residual_limit)
    F = chart.qdd(qc, v, u)
    a, grad, hess = tangent_derivatives(F, np.hstack([Ac[n:], Bc[n:]]), Hc[n:], v, n)
    top, H_top = state_rows(v[:6], n, 2 * n + m)
    A = np.vstack([top, grad[:, :2 * n]])
    B = np.vstack([np.zeros((n, m)), grad[:, 2 * n:]])
    return A, B, np.concatenate([H_top, hess])


def constraint_forces(system, q, v, u=None) -> np.ndarray:
    """The contacts' multipliers (:mod:`core.continuous.contacts`)."""
    from core.continuous.dynamics import dynamics_and_derivatives
    chart, qc, v, u = _evaluation(system, q, v, u)
    return dynamics_and_derivatives(chart, qc, v, u, False)[1]


def constraint(system, q, order: int = 0):
    """The contacts' rows ``h`` (and with ``order`` 1 ``Dh`` in the tangent space at ``δ = 0``)."""
    from core.continuous.dynamics import constraint as chart_constraint
    chart, qc, _, _ = _evaluation(system, q, np.zeros(system.nv), None)
    return chart_constraint(chart, qc, order)


def constraint_jacobians(system, q, v):
    """``(h, Dh, Jq)`` of the contacts in the tangent space at ``(q, v)``: ``Dh = dh/dδ`` and
    ``Jq = d(Dh(q ⊕ δ) v)/dδ`` at ``δ = 0`` (the chart's ``h(ξ)`` with ``ξ(δ)`` and ``ξ̇ = J⁻¹ v``
    composed to first order: ``dξ/dδ = I``, ``dξ̇/dδ`` from :func:`_velocity_jets`)."""
    from core.continuous.dynamics import constraint as chart_constraint
    chart, qc, v, _ = _evaluation(system, q, v, None)
    h, H1, H2 = chart_constraint(chart, qc, 2)
    Jq = np.einsum("rab,a->rb", H2, v)
    Jq[:, :6] += H1[:, :6] @ _velocity_gradient(v[:6])
    return h, H1, Jq


def gravity_force(system, q) -> np.ndarray:
    """``dL/dδ`` at rest: the generalized force of gravity (with springs) in the tangent space."""
    chart, qc, _, _ = _evaluation(system, q, np.zeros(system.nv), None)
    return chart.lagrangian_derivatives(qc, np.zeros(system.nv), 1).Lq


def momentum(system, q, v) -> np.ndarray:
    """``dL/dv`` (the chart's momentum at zero: its velocities are ``v`` there)."""
    chart, qc, v, _ = _evaluation(system, q, v, None)
    return chart.momentum(qc, v)


def energy(system, q, v) -> float:
    """``KE + V``: the chart's energy in the base frame plus ``-m g . p`` of the base's position."""
    chart, qc, v, _ = _evaluation(system, q, v, None)
    total = float(np.sum(chart.model.frame_mass))
    return chart.energy(qc, v) - total * float(system.gravity @ np.asarray(q, float)[:3])


def input_matrix(system, q) -> np.ndarray:
    chart, qc, _, _ = _evaluation(system, q, np.zeros(system.nv), None)
    return chart.input_matrix(qc)
