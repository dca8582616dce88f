"""The launch file and the parameter files (launch/launch_ros are not on PyPI, so the launch file
is compiled and inspected, not run; the parameter files are parsed and checked against the
node's parameters and the model)."""
import ast
import os
import py_compile

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(REPO, "launch", "mechnode.launch.py")
PARAM_FILES = ["mechnode/params/mechnode.yaml", "mechnode/params/cartpole_params.yaml",
               "mechnode/params/arm7_params.yaml", "mechnode/params/panda_params.yaml"]


def test_launch_file_compiles_and_references_an_existing_params_file(tmp_path):
    py_compile.compile(LAUNCH, cfile=str(tmp_path / "launch.pyc"), doraise=True)
    tree = ast.parse(open(LAUNCH).read())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    # DEFAULT_PARAMS = resources.files("mechnode") / "params" / "<file>": that file must exist
    assert 'resources.files("mechnode") / "params" / "mechnode.yaml"' in open(LAUNCH).read()
    from importlib import resources
    path = resources.files("mechnode") / "params" / "mechnode.yaml"
    assert path.is_file(), path
    assert "executable=\"mechnode\"" in open(LAUNCH).read()


@pytest.mark.parametrize("rel", PARAM_FILES)
def test_params_files_are_ros2_parameter_files_for_the_node(rel):
    with open(os.path.join(REPO, rel)) as fh:
        doc = yaml.safe_load(fh)
    (key, body), = doc.items()
    assert key.split("/")[-1] == "mechnode" and set(body) == {"ros__parameters"}
    params = body["ros__parameters"]
    from mechnode.demo import SCENARIOS
    from mechnode.joint_map import JointMap
    from mechnode.plant import Plant, parse_locked_joints
    from mechnode.weights import Weights
    # arm7_params.yaml and panda_params.yaml take their model from robot_description: the demo
    # publishes arm7.urdf or example-robot-data's panda.urdf there
    scenario = next((s for s in SCENARIOS.values() if s.params == os.path.basename(rel)), None)
    model = scenario.model_file() if params.get("robot_description_topic") else params["model"]
    plant = Plant.load(model, params["dt"], parse_locked_joints(params.get("locked_joints")))
    assert plant.system.name in ("cartpole", "mechnode_arm7", "panda")
    if scenario is not None:
        assert dict(scenario.locked) == plant.locked
    JointMap(plant.config_names, params.get("joint_map", []))
    Weights.from_values(plant, params["Q"], params["R"], params.get("Q_N", ()))
    from mechnode.limits import Limits
    limits = Limits.for_plant(plant, plant.config_names, params["state_position_limit"],
                              params["state_velocity_limit"], params["command_limit"],
                              params["state_timeout"], params["stamp_tolerance"],
                              params["accept_unstamped"])
    assert not limits.accept_unstamped and limits.command.shape == (plant.nu,)
    assert params["command_mode"] == "effort"


def test_model_files_and_parameter_files_are_kept_apart():
    """Every model file packaged with core (core/data/) is a model (``python -m core.demo`` and
    the node's ``model`` parameter take them by name); the node's parameter files live in
    mechnode/params/."""
    import core
    models = core.model_names()
    assert {"cartpole.yaml", "marionette.yaml", "arm7.urdf"} <= set(models)
    for name in models:
        core.load_system(name)
    params = sorted(f for f in os.listdir(os.path.join(REPO, "mechnode", "params")) if f.endswith(".yaml"))
    assert params == sorted(os.path.basename(p) for p in PARAM_FILES)
