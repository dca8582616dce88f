"""The compiled model: an immutable record of flat arrays that every kernel reads, and the codes
stored in it. A leaf module: it imports only :mod:`core.base.records`.

A :class:`core.System` (see :mod:`core.system`) compiles into a :class:`Model`; the kernels walk
its frames in topological order (parents first). Pinocchio-style separation: the model is what
the robot is and never changes; per-evaluation scratch lives in a separate workspace (see
:mod:`core.tree.workspace`).

Frames: each frame is placed relative to its parent by a constant offset followed by one simple
transform ``g_parent,frame = G_offset X_kind(value)``, ``kind`` one of the ``KIND_*`` codes and
``value`` a constant or the joint coordinate ``frame_qindex`` that drives it.

Joint coordinates and configuration variables: the kernels of :mod:`core.tree.kinematics`,
:mod:`core.tree.lagrangian`, :mod:`core.tree.rnea`, :mod:`core.tree.forces` and :mod:`core.tree.constraints` work on
the ``nj`` joint coordinates of the tree (every per-joint array has ``nj`` rows). They are the
``nq`` configuration variables unless some are coupled (URDF mimic joints): coordinate ``j`` is
then the affine function ``mimic_mul[j] q[mimic_src[j]] + mimic_off[j]`` of the variables, and
:mod:`core.tree.coupling` maps every quantity between the two (``nj == nq`` skips it).

Bodies: a frame carries a rigid body of mass ``frame_mass`` whose centre of mass sits at
``frame_com`` (frame coordinates) and whose inertia ``frame_inertia`` is taken about that centre
of mass along the frame's axes. In world coordinates the centre of mass is ``p + R c``.
"""
from __future__ import annotations

from core.base.jit import njit
from core.base.records import record_type, set_constructor

#: The fixed root frame's name.
WORLD = "world"

# Transform kinds, as stored in Model.frame_kind.
KIND_CONST, KIND_TX, KIND_TY, KIND_TZ, KIND_RX, KIND_RY, KIND_RZ = range(7)
# Holonomic constraint kinds, as stored in Model.hc_kind. HC_DIRECTION: a contact's row
# h = t . (p1 - p2) - c, its t and c per evaluation (Data.hc_dir, Data.hc_off).
HC_DISTANCE, HC_PLANE, HC_COINCIDE, HC_DIRECTION = 0, 1, 2, 3
# Input kinds, as stored in Model.input_kind.
INPUT_TORQUE, INPUT_WRENCH = 0, 1

MODEL_FIELDS = [
    # nq: the configuration variables (the system's coordinates); nj: the joint coordinates of
    # the frame tree that the kinematic kernels read, nq of them plus the coupled (mimic) ones
    "nq", "nj", "nf", "nu", "nh", "nv",
    # frames, in topological order (parents first); parent -1 is the world
    "frame_parent", "frame_kind", "frame_qindex", "frame_value",
    "frame_offset_R", "frame_offset_p", "frame_mass", "frame_inertia", "frame_joint",
    # each frame's body: centre of mass in frame coordinates; frame_inertia is about it
    "frame_com",
    # joints (joint coordinates that drive a frame); -1 where a coordinate drives none
    "joint_frame", "anc_ptr", "anc_idx", "joint_depth",
    # the variables' tree (each variable's parent: the nearest variable above its frame) as
    # core.base.linalg.tree_index lays it out; M has its pattern, so the tree Cholesky has no fill-in
    "tree_order", "tree_anc_ptr", "tree_anc_idx", "tree_desc_ptr", "tree_desc_idx",
    "gravity",
    # potentials and damping. Spring s on joint coordinate spring_q[s] has the polynomial force
    # -sum_k spring_coef[s, k] d^k, d = q - spring_rest[s], i.e. the potential
    # sum_k spring_coef[s, k] d^(k+1) / (k+1); rows are padded with zeros (width >= 2) and a
    # linear spring of stiffness k is [0, k]
    "spring_q", "spring_coef", "spring_rest", "damping",
    # rotor inertia (armature) per joint coordinate: M gains it on its diagonal, the kinetic
    # energy armature[j] dq_j^2 / 2
    "armature",
    "fspring_f1", "fspring_f2", "fspring_k", "fspring_rest",
    # linear dampers between frame origins: force -c dx/dt along the line, x = |p1 - p2|
    "damper_f1", "damper_f2", "damper_c",
    # inputs
    "input_kind", "input_q", "input_frame", "input_comp",
    # constant wrenches: one entry per nonzero component (frame, component 0-5 as fx..mz, value)
    "cwrench_frame", "cwrench_comp", "cwrench_value",
    # holonomic constraints h(q) = 0
    "hc_kind", "hc_f1", "hc_f2", "hc_axis", "hc_value", "hc_lenvar",
    # velocity constraints: origin of frame has zero velocity along that frame's axis
    "vc_frame", "vc_axis",
    # coupling (mimic joints): joint coordinate j is mimic_mul[j] q[mimic_src[j]] + mimic_off[j]
    # (1, 0 for a coordinate that is a configuration variable); without coupled coordinates
    # (nj == nq) mimic_src is the identity
    "mimic_src", "mimic_mul", "mimic_off",
]
ModelType, Model = record_type("Model", MODEL_FIELDS, __name__)


@njit(cache=True)
def _new_model(*fields):
    return Model(*fields)


set_constructor(Model, _new_model)
