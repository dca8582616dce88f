"""The launch file and the parameter files (launch/launch_ros are not on PyPI, so the launch file
is compiled and inspected, not run; the parameter files are parsed and checked against the
node's parameters and the model)."""
import ast
import os
import py_compile
from pathlib import Path

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(REPO, "launch", "mechnode.launch.py")
PARAM_FILES = ["config/mechnode.yaml", "config/cartpole_params.yaml", "config/arm7_params.yaml",
               "config/panda_params.yaml", "config/solo12_params.yaml"]


def test_launch_file_compiles_and_references_an_existing_params_file(tmp_path):
    py_compile.compile(LAUNCH, cfile=str(tmp_path / "launch.pyc"), doraise=True)
    tree = ast.parse(open(LAUNCH).read())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    # DEFAULT_PARAMS = config_file("<file>") (mechnode.paths, the one lookup): that file must exist
    assert 'DEFAULT_PARAMS = str(config_file("mechnode.yaml"))' in open(LAUNCH).read()
    from mechnode.paths import config_file
    path = config_file("mechnode.yaml")
    assert path == Path(REPO, "config", "mechnode.yaml"), path
    assert "executable=\"mechnode\"" in open(LAUNCH).read()


@pytest.mark.parametrize("rel", PARAM_FILES)
def test_params_files_are_ros2_parameter_files_for_the_node(rel):
    with open(os.path.join(REPO, rel)) as fh:
        doc = yaml.safe_load(fh)
    (key, body), = doc.items()
    assert key.split("/")[-1] == "mechnode" and set(body) == {"ros__parameters"}
    params = body["ros__parameters"]
    from mechnode.demo import SCENARIOS
    from mechnode.logic.joint_map import JointMap
    from mechnode.logic.plant import Plant, parse_locked_joints
    from mechnode.logic.weights import Weights
    # arm7_params.yaml and panda_params.yaml take their model from robot_description: the demo
    # publishes arm7.urdf or example-robot-data's panda.urdf there
    scenario = next((s for s in SCENARIOS.values() if s.params == os.path.basename(rel)), None)
    model = scenario.model_file() if params.get("robot_description_topic") else params.get("model")
    if params.get("floating_base") == "quaternion":
        # solo12_params.yaml: the model is given on the command line (example-robot-data's Solo12)
        from urdfref import robot_path

        from mechnode.logic.legged import LeggedPlant, parse_contacts
        assert "model" not in params
        plant = LeggedPlant.load(robot_path("solo_description/robots/solo12.urdf"), params["dt"],
                                 parse_contacts(params["contacts"]))
        assert params["idle_action"] == "balance"
    else:
        plant = Plant.load(model, params["dt"], parse_locked_joints(params.get("locked_joints")))
    assert plant.system.name in ("cartpole", "mechnode_arm7", "panda", "solo")
    if scenario is not None:
        assert dict(scenario.locked) == plant.locked
    JointMap(plant.config_names, params.get("joint_map", []))
    Weights.from_values(plant, params["Q"], params["R"], params.get("Q_N", ()))
    from mechnode.logic.limits import Limits
    limits = Limits.for_plant(plant, plant.config_names, params.get("state_position_limit", 1e3),
                              params.get("state_velocity_limit", 1e3), params["command_limit"],
                              params["state_timeout"], params["stamp_tolerance"],
                              params.get("accept_unstamped", False))
    assert not limits.accept_unstamped and limits.command.shape == (plant.nu,)
    assert params["command_mode"] == "effort"


def test_model_files_and_parameter_files_are_kept_apart():
    """Every model file packaged with core (core/data/) is a model (``python -m core.demo`` and
    the node's ``model`` parameter take them by name); the node's parameter files live in
    config/ (top level, installed to share/mechnode/config; nowhere else)."""
    import core
    models = core.data.model_names()
    assert {"cartpole.yaml", "marionette.yaml", "arm7.urdf"} <= set(models)
    for name in models:
        core.load_system(name)
    params = sorted(f for f in os.listdir(os.path.join(REPO, "config")) if f.endswith(".yaml"))
    assert params == sorted(os.path.basename(p) for p in PARAM_FILES)
    # one place: no copies inside the Python package
    assert not os.path.exists(os.path.join(REPO, "mechnode", "params"))
    assert not [f for _, _, files in os.walk(os.path.join(REPO, "mechnode")) for f in files if f in params]


def _paths_module_installed_at(site_packages: Path):
    """mechnode/paths.py copied into ``site_packages/mechnode`` and imported from there (as an
    installed mechnode would be)."""
    import importlib.util
    pkg = site_packages / "mechnode"
    pkg.mkdir(parents=True)
    (pkg / "paths.py").write_text(Path(REPO, "mechnode", "paths.py").read_text())
    spec = importlib.util.spec_from_file_location("installed_mechnode_paths", pkg / "paths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config_in(prefix: Path) -> Path:
    config = prefix / "share" / "mechnode" / "config"
    config.mkdir(parents=True)
    for rel in PARAM_FILES:
        (config / os.path.basename(rel)).write_text(Path(REPO, rel).read_text())
    return config


def test_config_lookup_in_an_install_prefix_and_the_ament_index(tmp_path, monkeypatch):
    """mechnode.paths.config_dir: <prefix>/share/mechnode/config of the prefix mechnode is
    installed into (colcon install space, pip), else a prefix of AMENT_PREFIX_PATH whose ament
    index has mechnode; a missing file is named with the directory looked in."""
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    prefix = tmp_path / "install" / "mechnode"
    paths = _paths_module_installed_at(prefix / "lib" / "python3.11" / "site-packages")
    config = _config_in(prefix)
    assert paths.config_dir() == config.resolve()
    assert paths.config_file("cartpole_params.yaml") == config.resolve() / "cartpole_params.yaml"
    with pytest.raises(FileNotFoundError, match="no_such.yaml"):
        paths.config_file("no_such.yaml")
    with pytest.raises(ValueError):
        paths.config_file("../mechnode.yaml")
    # a mechnode whose own prefix has no config/: found through the ament index
    other = _paths_module_installed_at(tmp_path / "elsewhere" / "lib" / "python3.11" / "site-packages")
    underlay = tmp_path / "underlay"
    shared = _config_in(underlay)
    index = underlay / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(underlay))
    assert shared not in other.config_candidates()       # not in the ament index yet
    (index / "mechnode").write_text("")
    assert other.config_dir() == shared
