"""Loading a :class:`System` from a URDF robot description (a file or the XML text that
``robot_state_publisher`` publishes on ``/robot_description``).

Kinematics and inertia only: visual, collision, transmission and Gazebo elements are ignored,
``package://`` is never resolved. How the URDF tree becomes frames:

* One frame per moving joint (``revolute``, ``continuous``, ``prismatic``), named after its child
  link, driven by a coordinate named after the joint. Order: depth first from the root, a link's
  child joints by name — the order of urdfdom, hence of Pinocchio's ``model.names`` and KDL.
  A joint axis ``a`` (any non-zero vector, normalized) costs no extra frame: along ``+x``,
  ``+y`` or ``+z`` the frame is an ``rx/ry/rz`` (``tx/ty/tz``) frame; otherwise the frame is the
  joint frame turned by a constant rotation ``R_a`` with ``R_a e_z = a`` (part of the frame's
  offset) and rotates (slides) about its own ``z``. The child link then sits at ``R_a^T`` in that
  frame: its children's offsets and its body are expressed there.
* ``fixed`` joints cost nothing at run time: the links they attach are merged into the body of
  the nearest moving joint above them (for a fixed base, the root link and everything fixed to it
  belong to the world). Merging combines masses, centres of mass and inertias exactly (parallel
  axis theorem), as Pinocchio does; the merged body's centre of mass is the frame's ``com``.
* A link's ``<inertial>`` (origin ``xyz`` + ``rpy``, full inertia tensor about the centre of mass
  in the inertial frame's axes) becomes mass, ``com`` and inertia of its body; links without
  ``<inertial>`` are massless. Each moving link's inertia passes the inertia policy
  (:mod:`core.model.inertia`, ``inertia=``: round-off silent, defects warned, refused or repaired);
  links welded to the world (by fixed or locked joints) are not checked: they cannot move.
* Origins: ``xyz`` and ``rpy``, the URDF's fixed-axis roll-pitch-yaw ``R = Rz(y) Ry(p) Rx(r)``.
* Inputs: one torque (force, for a prismatic joint) per actuated joint, named after it, in
  coordinate order; ``actuated=[names]`` restricts them, ``actuated="transmissions"`` takes the
  joints of the ``<transmission>`` elements. Limits (``<limit lower upper velocity effort>``,
  infinite where absent, no position limit on a continuous joint) and ``<dynamics damping
  friction>`` are kept as plain data (:attr:`System.joint_limits`); damping is applied with
  ``joint_damping=True`` (Pinocchio's ``aba`` does not apply it), friction never.
* ``armature``: rotor inertia on ``M``'s diagonal (:meth:`System.add_armature`); ``locked``:
  joints frozen at given values, their links folded into the parent (:meth:`System.lock`).
* Conventions of other tools: a ``world`` parent the file does not declare is the world frame;
  unknown elements (Gazebo, ``ros2_control``, Drake) are ignored; a file without moving joints
  is a system of zero coordinates.
* ``floating_base="quaternion"`` (or ``True``): the root link rides a free-flyer (seven
  coordinates ``root_x, root_y, root_z, root_qx, root_qy, root_qz, root_qw``, six velocities
  ``root_vx .. root_wz``; :meth:`System.set_free_flyer`, :mod:`core.continuous.floating`).
  ``floating_base="euler"``: six coordinates ``root_x, root_y, root_z`` (translations along the
  world axes) then ``root_yaw, root_pitch, root_roll`` (successive rotations about the moving z,
  y and x axes), so the root's orientation is ``Rz(yaw) Ry(pitch) Rx(roll)`` — the URDF's
  ``rpy = (roll, pitch, yaw)`` — and its position ``(x, y, z)``. That chart is singular at
  ``pitch = ±π/2`` (yaw and roll turn about the same axis): there the mass matrix is singular
  and the dynamics raise :class:`SingularMatrixError`; the integrator and the node take it.
* Mimic joints: ``mimic="couple"`` (the default) makes a mimic joint's value ``multiplier q +
  offset`` of the joint ``q`` it follows (:meth:`System.add_mimic`): it drives its frame but has
  no coordinate, input or limits of its own and is not in ``config_names``/``input_names``; the
  dynamics are those of the coupled system, derivatives exact (:mod:`core.tree.coupling`).
  :attr:`System.mimic_joints` lists the couplings, :meth:`System.mimic_positions` gives their
  values. A mimic of a mimic is refused (``ModelError`` naming it, as Pinocchio does); a mimic of
  an unknown, fixed or the same joint is ignored with a :class:`~core.errors.ModelWarning`.
  ``mimic="independent"`` gives a mimic joint its own coordinate and input (Pinocchio's default
  model). Files without mimic joints load the same with either.
* ``planar`` and ``floating`` joints inside the tree are refused (``ModelError`` naming the joint).

:attr:`System.links` maps every link to ``(frame, R, p)``: the frame it moves with (``"world"``
for a fixed base's root) and its constant placement in that frame.

Untrusted input: the XML is parsed with ``defusedxml``, which refuses entity declarations
("billion laughs") and external entities, after a size check (``max_bytes``). Every malformed
element raises :class:`ModelError` naming it.
"""
from __future__ import annotations

import math
import os
import warnings

import numpy as np

from core.errors import InertiaWarning, ModelError, ModelWarning
from core.model.compile import as_number
from core.model.inertia import MergedBody, check_inertia, check_policy
from core.model.record import WORLD
from core.system import System

#: Largest URDF accepted (bytes), checked before parsing; the largest robots of
#: example-robot-data are about 0.2 MB.
MAX_URDF_BYTES = 5_000_000

MOVING = ("revolute", "continuous", "prismatic")
FLOATING_BASE = ("root_x", "root_y", "root_z", "root_yaw", "root_pitch", "root_roll")
_FLOATING_KINDS = ("tx", "ty", "tz", "rz", "ry", "rx")


def load_urdf(source, *, floating_base=False, actuated=None, mimic: str = "couple",
              inertia: str = "warn", armature=None, joint_damping: bool = False, locked=None,
              gravity=(0.0, 0.0, -9.81), max_bytes: int = MAX_URDF_BYTES, contacts=None) -> System:
    """A :class:`System` from a URDF file path or XML text (see the module docstring).

    Parameters
    ----------
    floating_base : bool or str
        ``False``: the root link is fixed to the world; ``"quaternion"`` (or ``True``): a
        free-flyer ``root_x, root_y, root_z, root_qx, root_qy, root_qz, root_qw`` with the
        velocities ``root_vx .. root_wz`` (:meth:`System.set_free_flyer`); ``"euler"``: six
        coordinates ``root_x .. root_roll`` (singular at pitch ±90°; what the integrator and the
        node take).
    actuated : list of str or "transmissions", optional
        The joints that get an input (default: every moving joint); ``"transmissions"``: the
        joints named by the file's ``<transmission>`` elements.
    mimic : str
        ``"couple"`` (a mimic joint follows its leader) or ``"independent"``.
    inertia : str
        The inertia policy (:mod:`core.model.inertia`): ``"warn"``, ``"strict"`` or ``"repair"``.
    armature : float or dict, optional
        Rotor inertia added to ``M``'s diagonal: one number for every moving joint, or
        ``{joint: value}`` (:meth:`System.add_armature`).
    joint_damping : bool
        Apply the joints' ``<dynamics damping>`` as viscous damping (off by default, as in
        Pinocchio's ``aba``).
    locked : dict, optional
        ``{joint: value}``: joints frozen at these values, their bodies folded into their
        parent's (:meth:`System.lock`).
    max_bytes : int
        Size limit, checked before parsing.
    contacts : list, optional
        Contacts (:meth:`System.add_contact`): each a link name (a point contact) or a mapping
        ``{frame, kind, name}`` (``kind`` ``"point"`` or ``"frame"``); ``core.find_feet(system)``
        names a legged robot's feet.

    Returns
    -------
    System
        The robot, compiled (``system.model`` set), named after its ``<robot name>`` (else
        ``"robot"``).

    Raises
    ------
    ModelError
        A malformed file or option, naming the element.
    """
    if mimic not in ("couple", "independent"):
        raise ModelError(f"load_urdf: mimic must be 'couple' or 'independent', got {mimic!r}")
    check_policy(inertia)
    base = _floating_kind(floating_base)
    robot = _parse(_read(source, max_bytes))
    system = _build(robot, base, actuated, mimic, inertia, armature, joint_damping, locked, gravity)
    if contacts is not None:
        if isinstance(contacts, (str, dict)) or not isinstance(contacts, (list, tuple)):
            raise ModelError(f"load_urdf: contacts must be a list of link names or mappings, got {contacts!r}")
        for i, c in enumerate(contacts):
            if isinstance(c, str):
                system.add_contact(c)
            elif isinstance(c, dict) and "frame" in c and not set(c) - {"frame", "kind", "name"}:
                system.add_contact(c["frame"], c.get("kind", "point"), c.get("name"))
            else:
                raise ModelError(f"load_urdf: contacts[{i}] must be a link name or a mapping with 'frame' (and "
                                 f"optionally 'kind', 'name'), got {c!r}")
        system.compile()
    return system


def _floating_kind(floating_base):
    """``None``, ``"euler"`` or ``"quaternion"`` from the ``floating_base`` option."""
    if floating_base is False or floating_base is None:
        return None
    if floating_base is True:
        return "quaternion"
    if floating_base in ("euler", "quaternion"):
        return floating_base
    raise ModelError(f"load_urdf: floating_base must be False, True, 'quaternion' or 'euler', got "
                     f"{floating_base!r}")


# ------------------------------------------------------------------------------- reading
def _read(source, max_bytes: int) -> bytes:
    if isinstance(source, bytes):
        data = source.lstrip()
    elif isinstance(source, str) and source.lstrip().startswith("<"):
        data = source.lstrip().encode("utf-8")
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            size = os.path.getsize(path)
        except OSError as exc:
            raise ModelError(f"URDF {path!r}: cannot read ({exc.strerror or exc})") from None
        if size > max_bytes:
            raise ModelError(f"URDF {path!r}: {size} bytes exceeds the size limit of {max_bytes} bytes")
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    else:
        raise ModelError(f"load_urdf: expected a file path or URDF XML text, got {type(source).__name__}")
    if len(data) > max_bytes:
        raise ModelError(f"URDF: {len(data)} bytes exceeds the size limit of {max_bytes} bytes")
    return data


def _parse(data: bytes):
    """The ``<robot>`` element, parsed without entity expansion or external resources."""
    from xml.etree.ElementTree import ParseError

    import defusedxml
    from defusedxml import ElementTree as DET
    try:
        root = DET.fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except defusedxml.DTDForbidden as exc:
        raise ModelError(f"URDF: document type declarations are refused ({exc})") from None
    except defusedxml.EntitiesForbidden as exc:
        raise ModelError(f"URDF: entity declarations are refused (entity expansion, external "
                         f"entities): entity {exc.name!r}") from None
    except defusedxml.DefusedXmlException as exc:
        raise ModelError(f"URDF: refused unsafe XML ({exc})") from None
    except ParseError as exc:
        raise ModelError(f"URDF: not well-formed XML ({exc})") from None
    if root.tag != "robot":
        raise ModelError(f"URDF: the root element must be <robot>, got <{root.tag}>")
    return root


def _floats(text, n: int, where: str, default=None) -> np.ndarray:
    if text is None:
        if default is None:
            raise ModelError(f"{where}: missing")
        return np.array(default, dtype=float)
    parts = text.split()
    try:
        values = np.array([float(x) for x in parts])
    except ValueError:
        raise ModelError(f"{where}: expected {n} numbers, got {text!r}") from None
    if values.shape != (n,):
        raise ModelError(f"{where}: expected {n} numbers, got {text!r}")
    if not np.all(np.isfinite(values)):
        raise ModelError(f"{where}: must be finite, got {text!r}")
    return values


def _number(text, where: str, default: float) -> float:
    if text is None:
        return default
    try:
        x = float(text)
    except ValueError:
        raise ModelError(f"{where}: expected a number, got {text!r}") from None
    if math.isnan(x):
        raise ModelError(f"{where}: must be a number, got {text!r}")
    return x


def rpy_rotation(r: float, p: float, y: float) -> np.ndarray:
    """URDF fixed-axis roll-pitch-yaw: ``Rz(y) Ry(p) Rx(r)``."""
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _origin(element, where: str):
    """``(R, p)`` of an ``<origin xyz rpy>`` child (identity when absent)."""
    o = element.find("origin")
    if o is None:
        return np.eye(3), np.zeros(3)
    p = _floats(o.get("xyz"), 3, f"{where} origin xyz", default=(0.0, 0.0, 0.0))
    rpy = _floats(o.get("rpy"), 3, f"{where} origin rpy", default=(0.0, 0.0, 0.0))
    return rpy_rotation(*rpy), p


def _name(element, what: str, index: int) -> str:
    name = element.get("name")
    if not name:
        raise ModelError(f"URDF: {what} number {index} has no name")
    return name


def _link(element, name: str):
    """``(mass, com, inertia about the com in link axes)`` of a link (zeros without inertial),
    checked for form only: whether the body is physical is the inertia policy's question
    (:func:`core.model.inertia.check_inertia`), asked in :func:`_build` of the links that move."""
    where = f"link {name!r}"
    inertial = element.find("inertial")
    if inertial is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    R, com = _origin(inertial, f"{where} inertial")
    m_el = inertial.find("mass")
    mass = _number(m_el.get("value") if m_el is not None else None, f"{where} mass", 0.0)
    if not math.isfinite(mass):
        raise ModelError(f"{where}: mass must be finite, got {mass}")
    i_el = inertial.find("inertia")
    if i_el is None:
        I = np.zeros((3, 3))
    else:
        c = {k: _number(i_el.get(k), f"{where} inertia {k}", 0.0)
             for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        if not all(math.isfinite(v) for v in c.values()):
            raise ModelError(f"{where}: inertia must be finite, got {c}")
        I = np.array([[c["ixx"], c["ixy"], c["ixz"]], [c["ixy"], c["iyy"], c["iyz"]],
                      [c["ixz"], c["iyz"], c["izz"]]])
    return mass, com, R @ I @ R.T


def _body(links: dict, name: str, policy: str):
    """A moving link's ``(mass, com, inertia)`` under the inertia policy (a negative mass is
    refused whatever the policy)."""
    mass, com, inertia = links[name]
    if mass < 0:
        raise ModelError(f"link {name!r}: mass must be non-negative, got {mass}")
    return mass, com, check_inertia(inertia, f"link {name!r}", policy, stacklevel=5)


def _joint(element, name: str, links: dict) -> dict:
    where = f"joint {name!r}"
    jtype = element.get("type")
    if jtype in ("planar", "floating"):
        raise ModelError(f"{where}: {jtype} joints inside the tree are not supported (only revolute, "
                         "continuous, prismatic, fixed; a floating root: floating_base=True)")
    if jtype not in MOVING + ("fixed",):
        raise ModelError(f"{where}: unknown joint type {jtype!r} (revolute, continuous, prismatic, fixed)")
    ends = {}
    for end in ("parent", "child"):
        el = element.find(end)
        link = el.get("link") if el is not None else None
        if not link:
            raise ModelError(f"{where}: missing <{end} link=...>")
        if link not in links:
            raise ModelError(f"{where}: unknown {end} link {link!r}")
        ends[end] = link
    if ends["parent"] == ends["child"]:
        raise ModelError(f"{where}: link {ends['parent']!r} is its own parent")
    R, p = _origin(element, where)
    j = dict(name=name, type=jtype, parent=ends["parent"], child=ends["child"], R=R, p=p, mimic=None,
             lower=-math.inf, upper=math.inf, velocity=math.inf, effort=math.inf, damping=0.0, friction=0.0)
    if jtype == "fixed":
        return j
    ax = element.find("axis")
    axis = _floats(ax.get("xyz") if ax is not None else None, 3, f"{where} axis", default=(1.0, 0.0, 0.0))
    norm = float(np.linalg.norm(axis))
    if norm < 1e-12:
        raise ModelError(f"{where}: axis must be a non-zero vector, got {ax.get('xyz')!r}")
    j["axis"] = axis / norm
    lim = element.find("limit")
    if lim is not None:
        for key in ("velocity", "effort"):
            value = _number(lim.get(key), f"{where} limit {key}", math.inf)
            if value < 0:
                raise ModelError(f"{where}: limit {key} must be non-negative, got {value}")
            j[key] = value
        if jtype != "continuous":
            j["lower"] = _number(lim.get("lower"), f"{where} limit lower", 0.0)
            j["upper"] = _number(lim.get("upper"), f"{where} limit upper", 0.0)
            if j["lower"] > j["upper"]:
                raise ModelError(f"{where}: limit lower {j['lower']} exceeds upper {j['upper']}")
    dyn = element.find("dynamics")
    if dyn is not None:
        for key in ("damping", "friction"):
            j[key] = _number(dyn.get(key), f"{where} dynamics {key}", 0.0)
            if not math.isfinite(j[key]) or j[key] < 0:
                raise ModelError(f"{where}: dynamics {key} must be finite and non-negative, got {j[key]}")
    mim = element.find("mimic")
    if mim is not None:
        leader = mim.get("joint")
        if not leader:
            raise ModelError(f"{where}: <mimic> needs a joint attribute")
        j["mimic"] = (leader, _number(mim.get("multiplier"), f"{where} mimic multiplier", 1.0),
                      _number(mim.get("offset"), f"{where} mimic offset", 0.0))
        for k, v in zip(("multiplier", "offset"), j["mimic"][1:], strict=True):
            if not math.isfinite(v):
                raise ModelError(f"{where}: mimic {k} must be finite, got {v}")
    return j


# ------------------------------------------------------------------------------- the tree
def _tree(robot):
    """Links (name -> body data), joints (name -> dict, file order), the root link, and each
    link's child joints by name; names the element of every structural error."""
    links = {}
    for i, el in enumerate(robot.findall("link")):
        name = _name(el, "link", i)
        if name in links:
            raise ModelError(f"URDF: duplicate link name {name!r}")
        links[name] = el
    if not links:
        raise ModelError("URDF: the robot has no <link>")
    links = {name: _link(el, name) for name, el in links.items()}
    # a 'world' parent that the file does not declare is the world frame (Drake's files do this;
    # ROS files declare <link name="world"/>): an empty link, the root of a fixed base
    if WORLD not in links and any((el.find("parent") is not None and el.find("parent").get("link") == WORLD)
                                  for el in robot.findall("joint")):
        links[WORLD] = (0.0, np.zeros(3), np.zeros((3, 3)))
    joints = {}
    parent_joint = {}
    for i, el in enumerate(robot.findall("joint")):
        name = _name(el, "joint", i)
        if name in joints:
            raise ModelError(f"URDF: duplicate joint name {name!r}")
        j = _joint(el, name, links)
        if j["child"] in parent_joint:
            raise ModelError(f"joint {name!r}: link {j['child']!r} already has parent joint "
                             f"{parent_joint[j['child']]!r} (a link has one parent)")
        parent_joint[j["child"]] = name
        joints[name] = j
    for j in joints.values():
        if j["mimic"] is not None:
            leader = j["mimic"][0]
            defect = ("unknown joint" if leader not in joints else "itself" if leader == j["name"]
                      else "fixed joint" if joints[leader]["type"] == "fixed" else None)
            if defect:
                what = f"{defect} {leader!r}" if defect != "itself" else defect
                warnings.warn(f"joint {j['name']!r}: mimics {what}; the mimic is ignored (the joint moves "
                              "on its own, as in Pinocchio's default model)", ModelWarning, stacklevel=4)
                j["mimic"] = None
    roots = [n for n in links if n not in parent_joint]
    if len(roots) != 1:
        if not roots:
            raise ModelError("URDF: no root link (every link has a parent joint: the joints form a cycle)")
        raise ModelError(f"URDF: more than one root link {roots} (links without a parent joint); "
                         "a robot is one tree")
    children = {n: [] for n in links}
    for jn in sorted(joints):       # urdfdom keeps joints in a map: a link's children by name
        children[joints[jn]["parent"]].append(jn)
    reached, stack = {roots[0]}, [roots[0]]
    while stack:
        for jn in children[stack.pop()]:
            c = joints[jn]["child"]
            if c not in reached:
                reached.add(c)
                stack.append(c)
    if len(reached) != len(links):
        cycle = [n for n in links if n not in reached]
        raise ModelError(f"URDF: links {cycle} are not reachable from the root {roots[0]!r}: their "
                         "joints form a cycle")
    return links, joints, roots[0], children


def _alignment(axis: np.ndarray):
    """``(kind index 0..2, R_a)``: an axis along +x/+y/+z needs no rotation; otherwise ``R_a``
    turns ``e_z`` onto the axis (about ``e_z x axis``)."""
    for i in range(3):
        if abs(axis[i] - 1.0) < 1e-12:
            return i, np.eye(3)
    z = np.array([0.0, 0.0, 1.0])
    k = np.cross(z, axis)
    s, c = float(np.linalg.norm(k)), float(axis[2])
    if s < 1e-12:                     # axis = -z: a half turn about x
        return 2, np.diag([1.0, -1.0, -1.0])
    k /= s
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return 2, np.eye(3) + s * K + (1.0 - c) * K @ K


# ------------------------------------------------------------------------------- building
def _transmissions(robot, joints: dict) -> list[str]:
    """The joints named by the ``<transmission>`` elements (ROS's ``<joint name>`` children, in
    file order, each once)."""
    names = []
    for i, tr in enumerate(robot.findall("transmission")):
        where = f"transmission {tr.get('name') or i!r}"
        found = tr.findall("joint")
        if not found:
            raise ModelError(f"{where}: names no <joint>")
        for el in found:
            name = el.get("name")
            if not name:
                raise ModelError(f"{where}: a <joint> without a name")
            if name not in joints:
                raise ModelError(f"{where}: unknown joint {name!r}")
            if name not in names:
                names.append(name)
    if not names:
        raise ModelError("actuated='transmissions': the file has no <transmission> element")
    return names


def _locked(locked, joints: dict, coupled: dict) -> dict:
    """``{joint: value}`` checked: moving joints, finite values within their position limits;
    a coupled (mimic) joint follows its leader, so it is locked with it, never on its own."""
    if locked is None:
        return {}
    if not isinstance(locked, dict):
        raise ModelError(f"locked: expected a mapping {{joint: value}}, got {locked!r}")
    out = {}
    for name, value in locked.items():
        where = f"locked joint {name!r}"
        if name not in joints:
            raise ModelError(f"{where}: unknown joint")
        j = joints[name]
        if j["type"] == "fixed":
            raise ModelError(f"{where}: a fixed joint has nothing to lock")
        if name in coupled:
            raise ModelError(f"{where}: it mimics {coupled[name][0]!r} (mimic='couple'); lock "
                             f"{coupled[name][0]!r}, or load with mimic='independent'")
        x = as_number(value, where)
        if not j["lower"] <= x <= j["upper"]:
            raise ModelError(f"{where}: value {x} is outside its limits [{j['lower']}, {j['upper']}]")
        out[name] = x
    return out


def _build(robot, base, actuated, mimic: str, policy: str, armature, joint_damping: bool, locked,
           gravity) -> System:
    links, joints, root, children = _tree(robot)
    coupled = {}
    if mimic == "couple":
        coupled = {n: j["mimic"] for n, j in joints.items() if j["mimic"] is not None}
        for name, (leader, _, _) in coupled.items():
            if leader in coupled:
                raise ModelError(f"joint {name!r}: mimics joint {leader!r}, itself a mimic joint (a "
                                 "mimic of a mimic is refused, as by Pinocchio); mimic the joint "
                                 f"{coupled[leader][0]!r} directly")
    locked = _locked(locked, joints, coupled)
    system = System(gravity=gravity, name=robot.get("name") or "robot", inertia=policy)
    placement = {}          # link -> (frame, R, p): where the link sits in its body's frame
    bodies: dict[str, MergedBody] = {}             # frame -> MergedBody
    order: list[tuple] = []              # frames in creation order: (name, parent, kind, value, R_off, p_off)
    welded = set()          # links rigidly attached to the world (fixed or locked joints only)
    if base is not None:
        if root == WORLD:
            raise ModelError("floating_base: the root link is 'world' (fixed to the world by its joints); "
                             "a floating base needs the robot's own root link")
        taken = [n for n in FLOATING_BASE[:-1] if n in links]
        if taken and base == "euler":
            raise ModelError(f"floating_base: link name(s) {taken} collide with the floating base's frames")
        if base == "euler":
            parent = WORLD
            for var, kind in zip(FLOATING_BASE, _FLOATING_KINDS, strict=True):
                frame = root if var == FLOATING_BASE[-1] else var
                order.append((frame, parent, kind, var, np.eye(3), np.zeros(3)))
                parent = frame
        else:
            order.append((root, WORLD, None, None, np.eye(3), np.zeros(3)))
        placement[root] = (root, np.eye(3), np.zeros(3))
        bodies[root] = MergedBody()
    else:
        placement[root] = (WORLD, np.eye(3), np.zeros(3))
        welded.add(root)
    coords = [v for v in FLOATING_BASE] if base == "euler" else []
    # depth first from the root, children in name order (urdfdom's, hence Pinocchio's and KDL's)
    stack = [root]
    visit = []
    while stack:
        link = stack.pop()
        visit.append(link)
        for jn in reversed(children[link]):
            j = joints[jn]
            frame, R_bp, p_bp = placement[link]
            R_j, p_j = R_bp @ j["R"], R_bp @ j["p"] + p_bp     # joint frame in the body frame
            child = j["child"]
            if link in welded and (j["type"] == "fixed" or jn in locked):
                welded.add(child)
            if j["type"] == "fixed":
                placement[child] = (frame, R_j, p_j)
            else:
                if child in bodies or child == WORLD:
                    raise ModelError(f"joint {jn!r}: child link name {child!r} is reserved")
                axis_index, R_a = _alignment(j["axis"])
                kind = ("r" if j["type"] != "prismatic" else "t") + "xyz"[axis_index]
                order.append((child, frame, kind, jn, R_j @ R_a, p_j))
                placement[child] = (child, R_a.T, np.zeros(3))
                bodies[child] = MergedBody()
            stack.append(child)
    # sort frames by depth-first visit of their child links (joints are pushed in reverse)
    rank = {link: i for i, link in enumerate(visit)}
    fixed_frames = order[:{"euler": len(FLOATING_BASE) - 1, "quaternion": 1}[base]] if base is not None else []
    moving = sorted(order[len(fixed_frames):], key=lambda f: rank[f[0]])
    for link in visit:                  # (the inertia policy's warnings in tree order)
        if link not in welded:          # a link welded to the world cannot move: its inertia is moot
            frame, R, p = placement[link]
            mass, com, inertia = _body(links, link, policy)
            bodies[frame].add(mass, com, inertia, R, p)
    for name, parent, kind, value, R_off, p_off in fixed_frames + moving:
        body = bodies.get(name)
        m, c, I = body.mass_com_inertia() if body is not None else (0.0, np.zeros(3), np.zeros((3, 3)))
        with warnings.catch_warnings():     # (the policy has judged every link of the body above)
            warnings.simplefilter("ignore", InertiaWarning)
            system.add_frame(name, parent=parent, mass=m, inertia=I, com=c,
                             offset={"translation": p_off, "rotation": R_off}, **({kind: value} if kind else {}))
        if value in joints:
            coords.append(value)
    for name, (leader, multiplier, offset) in coupled.items():
        system.add_mimic(name, leader, multiplier, offset)
    for name, value in locked.items():
        system.lock(name, value)
    if base == "quaternion":
        system.set_free_flyer(root, prefix="root")
    # inputs, limits, damping and armature (a coupled joint has no coordinate, input or limits;
    # a locked one none of them)
    moving_joints = [c for c in coords if c in joints and c not in coupled and c not in locked]
    if actuated is None:
        chosen = moving_joints
    else:
        if isinstance(actuated, str) and actuated != "transmissions":
            raise ModelError(f"actuated: expected a list of joint names or 'transmissions', got {actuated!r}")
        chosen = _transmissions(robot, joints) if actuated == "transmissions" else list(actuated)
        for name in chosen:
            if name not in joints:
                raise ModelError(f"actuated: unknown joint {name!r}")
            if name in coupled:
                raise ModelError(f"actuated: joint {name!r} mimics {coupled[name][0]!r} (mimic='couple': "
                                 "no coordinate, no input)")
            if name in locked:
                raise ModelError(f"actuated: joint {name!r} is locked (no coordinate, no input)")
            if name not in moving_joints:
                raise ModelError(f"actuated: joint {name!r} is {joints[name]['type']} (no coordinate)")
        if len(set(chosen)) != len(chosen):
            raise ModelError(f"actuated: duplicate joint names in {chosen}")
        chosen = [c for c in moving_joints if c in set(chosen)]
    for name in chosen:
        system.add_input("torque", config=name, name=name)
    for name in moving_joints:
        j = joints[name]
        system.set_joint_limits(name, lower=j["lower"], upper=j["upper"], velocity=j["velocity"],
                                effort=j["effort"], damping=j["damping"], friction=j["friction"])
    driven = [c for c in coords if c in joints and c not in locked]      # coupled joints too
    if joint_damping:
        for name in driven:
            if joints[name]["damping"] > 0:
                system.add_damping(name, joints[name]["damping"])
    for name, value in _armature(armature, joints, driven, locked).items():
        system.add_armature(name, value)
    system.links = {link: (frame, R.copy(), p.copy()) for link, (frame, R, p) in placement.items()}
    system.compile()
    return system


def _armature(armature, joints: dict, driven: list, locked: dict) -> dict:
    """``{joint: rotor inertia}`` from the ``armature`` option: a number for every moving joint
    or a mapping (a locked joint's is moot: it is dropped)."""
    if armature is None:
        return {}
    if isinstance(armature, dict):
        for name in armature:
            if name not in joints:
                raise ModelError(f"armature: unknown joint {name!r}")
            if name not in driven and name not in locked:
                raise ModelError(f"armature: joint {name!r} is {joints[name]['type']} (no coordinate)")
        return {n: v for n, v in armature.items() if n not in locked}
    return {name: armature for name in driven}
