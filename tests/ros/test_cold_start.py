"""A cold numba cache shows on the console: what compiles, how far, how long.

A fresh ``NUMBA_CACHE_DIR`` holding every kernel but one of those the node needs before it may
activate (``core.control.riccati.lq_riccati``, a few seconds to compile): the node compiles it from its
start (two processes; configure waits for them) and says so, counted (``kernel 1 of ~1``);
with the ``mechnode`` command on its own stderr (the console), with ``python -m mechnode.demo``
relayed from the node's process to the demo's stdout (``node | core: ...``), besides the node's
log. (A whole cold start takes minutes: the missing kernel stands for all of them.)"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MISSING = "riccati.lq_riccati"          # (numba names a cache file module.function)
MISSING_DIR = os.path.join("control", "__pycache__")
KERNEL = "control.riccati.lq_riccati"


def _cache_dirs(env) -> dict:
    """numba's cache directory of core's kernels under ``env``'s NUMBA_CACHE_DIR, for each of
    core's ``__pycache__`` directories (one per layer: numba keeps a directory per source directory)."""
    code = ("import os, sys, core, core.warmup\n"
            "for m in [m for n, m in list(sys.modules.items()) if n == 'core' or n.startswith('core.')]:\n"
            "    for k in vars(m).values():\n"
            "        path = getattr(getattr(k, '_cache', None), '_cache_path', None)\n"
            "        if path and hasattr(k, 'py_func'):\n"
            "            src = os.path.join(os.path.dirname(k.py_func.__code__.co_filename), '__pycache__')\n"
            "            print(src + '|' + path)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                         check=True)
    found = dict(line.split("|") for line in out.stdout.splitlines() if "|" in line)
    assert len(found) >= 5, found        # (base, model, tree, continuous, discrete, control)
    return found


@pytest.fixture
def almost_warm(tmp_path):
    """(env) with a NUMBA_CACHE_DIR that lacks only core.control.riccati.lq_riccati."""
    from core import warmup
    from mechnode.logic.plant import REST_PARTS
    warmup.run(warmup.CONTROL_PARTS + REST_PARTS)     # the default cache warm (loads, if it is)
    assert warmup.pending(warmup.CONTROL_PARTS + REST_PARTS) == []
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    for source, target in _cache_dirs(env).items():
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(source):
            missing = source.endswith(MISSING_DIR) and name.startswith(f"{MISSING}-")
            if name.endswith((".nbi", ".nbc")) and not missing:
                shutil.copy2(os.path.join(source, name), target)
    return env


def test_the_node_command_shows_what_compiles_on_its_console(almost_warm, tmp_path):
    env = dict(almost_warm, ROS_DOMAIN_ID=os.environ["ROS_DOMAIN_ID"])
    env.pop("MECHNODE_COMPILE_MESSAGES", None)
    cmd = [sys.executable, "-m", "mechnode", "--autostart", "--ros-args", "--params-file",
           os.path.join(ROOT, "config", "cartpole_params.yaml"), "-r", f"__ns:=/cold_{os.getpid()}"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(tmp_path))
    try:
        # configured (and active) once the missing kernel has compiled: then the node is stopped
        lines = []
        for line in proc.stderr:
            lines.append(line.rstrip())
            if "active: state" in line:
                break
    finally:
        proc.send_signal(2)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    text = "\n".join(lines)
    assert re.search(r"^core: the numba cache lacks 1 kernels", text, re.M), text
    kernel = re.escape(f"core.{KERNEL}")
    assert re.search(rf"core(\[\d/2\])?: compiling {kernel} \(kernel 1 of ~1\) \.\.\.", text), text
    assert re.search(rf"core(\[\d/2\])?: compiled {kernel} in \d+\.\d s \(kernel 1 of ~1; ", text), text
    assert re.search(r"warm-up: compiled the 1 kernels of the command path, the schedules and the hold; "
                     r"configure waited \d+\.\d s for them", text), text


def test_the_demo_relays_the_nodes_compile_lines(almost_warm, rclpy_mod, ifaces, monkeypatch):
    from mechnode import demo
    for key in ("NUMBA_CACHE_DIR", "PYTHONPATH"):
        monkeypatch.setenv(key, almost_warm[key])
    lines = []
    status, _, _ = demo.run(namespace=f"/cold_demo_{os.getpid()}", timeout=30.0, log=lines.append,
                            context_domain=int(os.environ["ROS_DOMAIN_ID"]))
    text = "\n".join(lines)
    assert status == 0, text
    assert re.search(rf"^node \| core(\[\d/2\])?: compiling core\.{re.escape(KERNEL)} \(kernel 1 of ~1\) \.\.\.$",
                     text, re.M), text
    assert re.search(rf"^node \| core(\[\d/2\])?: compiled core\.{re.escape(KERNEL)} in ", text, re.M), text
    assert re.search(r"^node \| core: the numba cache lacks 1 kernels", text, re.M), text
    assert re.search(r"^node \| warm-up: compiled the 1 kernels", text, re.M), text
    # only progress is relayed: the node's other log lines stay in its log
    assert not any(s.startswith("node | ") and "active: state" in s for s in lines), text
