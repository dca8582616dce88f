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
PARAM_FILES = ["config/params/mechnode.yaml", "config/params/cartpole_params.yaml"]


def test_launch_file_compiles_and_references_an_existing_params_file(tmp_path):
    py_compile.compile(LAUNCH, cfile=str(tmp_path / "launch.pyc"), doraise=True)
    tree = ast.parse(open(LAUNCH).read())
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    # DEFAULT_PARAMS = os.path.join(<repo>, "config", "<file>"): that file must exist
    joins = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "join"
             and any(isinstance(a, ast.Constant) and str(a.value).endswith(".yaml") for a in n.args)]
    assert joins, "no params file path in the launch file"
    parts = [a.value for a in joins[0].args if isinstance(a, ast.Constant)]
    path = os.path.join(REPO, *parts)
    assert os.path.isfile(path), path
    assert "executable=\"mechnode\"" in open(LAUNCH).read()


@pytest.mark.parametrize("rel", PARAM_FILES)
def test_params_files_are_ros2_parameter_files_for_the_node(rel):
    with open(os.path.join(REPO, rel)) as fh:
        doc = yaml.safe_load(fh)
    (key, body), = doc.items()
    assert key.split("/")[-1] == "mechnode" and set(body) == {"ros__parameters"}
    params = body["ros__parameters"]
    from mechnode.joint_map import JointMap
    from mechnode.plant import Plant
    from mechnode.weights import Weights
    plant = Plant.load(params["model"], params["dt"])
    assert plant.system.name == "cartpole"
    JointMap(plant.config_names, params["joint_map"])
    Weights.from_values(plant, params["Q"], params["R"], params.get("Q_N", ()))
    from mechnode.limits import Limits
    limits = Limits.for_plant(plant, plant.config_names, params["state_position_limit"],
                              params["state_velocity_limit"], params["command_limit"],
                              params["state_timeout"], params["stamp_tolerance"],
                              params["accept_unstamped"])
    assert not limits.accept_unstamped and limits.command.shape == (plant.nu,)
    assert params["command_mode"] == "effort"


def test_model_files_and_parameter_files_are_kept_apart():
    """Every YAML file in config/ is a model (``python -m core.demo`` and the node's ``model``
    parameter take them); the node's parameter files live in config/params/."""
    import core
    config = os.path.join(REPO, "config")
    models = sorted(f for f in os.listdir(config) if f.endswith(".yaml"))
    assert "cartpole.yaml" in models and "marionette.yaml" in models
    for name in models:
        core.load_system(os.path.join(config, name))
    params = sorted(os.listdir(os.path.join(config, "params")))
    assert params == sorted(os.path.basename(p) for p in PARAM_FILES)
