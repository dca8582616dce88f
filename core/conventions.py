"""The conventions of mechnode, written once.

:data:`CONVENTIONS` is the one source: the "Conventions" section of docs/guide.md is this text (a test
checks it; ``python -m core.conventions`` prints it), and the node's ``GetModel`` service
answers it in ``conventions``. Module docstrings refer here instead of restating it.
"""
from __future__ import annotations

CONVENTIONS = """\
* Units: SI (m, rad, kg, s, N, N m).
* Bodies: a frame's `mass` sits at its `com` (frame coordinates, default the frame's origin);
  its `inertia` is about the `com`, along the frame's axes.
* Configuration variables `q`: order of first appearance in `frames`, then variables that drive
  no frame (e.g. a string length) in order of appearance in `constraints`, then `kinematic`
  (`System.config_names`); a variable coupled to another (`mimic`, e.g. a URDF mimic joint) is
  none of them (`System.mimic_joints`). Inputs `u`: order of `inputs`, a wrench expanding to six inputs
  `fx, fy, fz, mx, my, mz` (`System.input_names`).
* Continuous state `x = [q, dq]` (`System.state_names`, all n variables), input
  `u = [force inputs, ddq of the kinematic variables]` (`System.continuous_input_names`: the
  accelerations `<name>_ddot` of the `kinematic` variables, prescribed as in trep). Equations,
  on the dynamic rows D only (kinematic rows K: `ddq_K = u_K`):
  `(M ddq + L_vq dq - L_q)_D = F_D(q, dq, u) + A_D^T lam`, `A ddq + b = 0` (`A`: holonomic
  Jacobians in the order of `constraints`, a `coincide` entry one row per axis, then the
  velocity-constraint rows). Linearization: `d/dt x = A x + B u`, `A` (2n, 2n), `B` (2n, m + nk);
  it refuses a state off the constraints (`residual_limit`, default 1e-6; `None` skips).
* Quaternion floating base (`floating_base="quaternion"`, `System.set_free_flyer`, Pinocchio's
  free-flyer): `q = [x, y, z, qx, qy, qz, qw, joints]` (the base's origin in the world, its
  orientation a unit quaternion, scalar last), `v = [vx, vy, vz, wx, wy, wz, joints]` (the base's
  spatial velocity in its own frame, `System.velocity_names`), `nq = nv + 1`;
  `q ⊕ v = System.integrate(q, v)` moves the base by `exp(v)` in its own frame. `qdd` is `dv/dt`;
  `linearize` is in the tangent space: `A` (2nv, 2nv) for `[δ, v]` with `x = x̄ ⊕ δ`
  (`System.state_names`), its top-left block `-ad(v)` on the base.
* Contacts (`System.add_contact`, `contacts` in YAML, `load_urdf(contacts=...)`): holonomic rows
  after the other constraints, in the order added: a `point` contact's three rows hold its
  frame's origin on the world x, y, z axes; a `frame` contact adds three rows whose rates are its
  angular velocity on its anchor's axes. The anchor (the held pose) is where the frame is at the
  evaluated `q` unless `anchors=` (`System.contact_anchors`) says otherwise; derivatives hold it.
  `lam` is what the world exerts: a point's force (N, world axes), then a frame's moment (N m,
  anchor axes); `System.contact_wrenches` gives `[f, m]` per contact on the world axes at the
  frame's origin (Pinocchio's `LOCAL_WORLD_ALIGNED`).
* Variational integrator: `x_k = [q_k (all), p_k (dynamic variables), v_k (kinematic
  velocities)]` (`MidpointVI.state_names`), `u_k = [force inputs, next values of the kinematic
  variables]` (`MidpointVI.input_names`); `p = dL/d dq` on the dynamic rows. Discrete
  Lagrangian `L_d = dt L((q_k + q_k+1)/2, (q_k+1 - q_k)/dt)`, `F_d^- = dt F(...)`, `F_d^+ = 0`.
* Second-order tensors: `H[i, a, b] = d2 x_next_i / dz_a dz_b`, `z = [x, u]` (integrator,
  `MidpointVI.linearize2`) and `H[i, a, b] = d2 (d/dt x)_i / dz_a dz_b`, `z = [q, dq, u]`
  (continuous, `System.linearize2`); C order, symmetric in `a, b`. Lagrangian derivatives:
  `Lqv[a, i] = d2L/dq_a dv_i`, `Lqqv[a, b, i]`, `Lqvv[a, i, j]`.
* Twists `(v, w)` (linear part first), wrenches `(f, m)`; signs: generalized forces act along
  increasing `q`.
* LQR: linearizations stacked `A` (N, nx, nx), `B` (N, nx, nu); gains `K` (N, nu, nx), law
  `u_k = u_ref,k - K_k (x_k - x_ref,k)`; Riccati matrices `P` (N+1, nx, nx), `P[N]` terminal.
* Minimal linearization: state `[independent q, independent dq]` in model order (on a quaternion
  base, independent tangent directions and velocities, named by `System.velocity_names`).
  Balance gains (`core.balance_lqr`): `K` (nu, 2nv) on `[q ⊖ q̄, v]`, `u = ū - K x`.
* General-form `Linearizer` (Crist): coordinates `q`, generalized speeds `v` (SymPy's and
  Crist's `u`), inputs `u` (their `r`); `A` acts on `[q_ind, v_ind]`, `B` on `u`.
"""


if __name__ == "__main__":
    print(CONVENTIONS, end="")
