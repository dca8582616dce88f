"""Every ```python block of README.md and docs/*.md runs as written.

The blocks of one file run in order, in one fresh Python process and one shared namespace (the
guide builds on its earlier blocks: a block may use names an earlier block of the same file
defined), from an empty temporary directory (so they rely on packaged models, e.g.
``"cartpole.yaml"``, not on the repository's paths). Each block is compiled under its file's name
with its real line numbers, so a failure names ``file:line`` of the block and the traceback
points into the Markdown. Blocks that must not run use another fence language (```bash,
```yaml, ```text); ```py, ```python3 and ```pycon are refused so that nothing escapes by
spelling.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(```+|~~~+)\s*([^\s`]*)\s*$")
REFUSED = {"py", "python3", "pycon", "ipython", "Python"}


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def fenced_blocks(path: Path) -> list[tuple[str, int, str]]:
    """``(language, first code line (1-based), code)`` of every fenced block of ``path``."""
    blocks, lines = [], path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith(fence[:3]):
            j += 1
        if j == len(lines):
            raise AssertionError(f"{path.relative_to(ROOT)}:{i + 1}: unclosed code fence")
        blocks.append((lang, start + 1, "\n".join(lines[start:j]) + "\n"))
        i = j + 1
    return blocks


#: runs in the child: the blocks of one file in order, one namespace, each under file:line
RUNNER = textwrap.dedent("""
    import json, sys, traceback
    blocks = json.load(sys.stdin)
    namespace = {"__name__": "__main__"}
    for name, line, code in blocks:
        try:
            exec(compile("\\n" * (line - 1) + code, name, "exec"), namespace)
        except BaseException:
            print(f"DOCS BLOCK FAILED: {name}:{line}", file=sys.stderr)
            traceback.print_exc()
            sys.exit(1)
""")


def run_blocks(name: str, blocks: list[tuple[int, str]], cwd: Path, timeout: float = 600):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-c", RUNNER], cwd=cwd, env=env, text=True,
                          input=json.dumps([[name, line, code] for line, code in blocks]),
                          capture_output=True, timeout=timeout)


def with_python_blocks() -> list[Path]:
    """The Markdown files that have python blocks (the README and the guide, at least)."""
    files = [p for p in markdown_files() if any(lang == "python" for lang, _, _ in fenced_blocks(p))]
    assert ROOT / "README.md" in files and ROOT / "docs" / "guide.md" in files
    return files


@pytest.mark.parametrize("path", with_python_blocks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(path, tmp_path):
    name = str(path.relative_to(ROOT))
    blocks = [(line, code) for lang, line, code in fenced_blocks(path) if lang == "python"]
    result = run_blocks(name, blocks, tmp_path)
    assert result.returncode == 0, (
        f"a python block of {name} failed (blocks of {name} run in order in one namespace):\n"
        f"{result.stderr[-6000:]}")


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_fences_say_what_they_are(path):
    name = str(path.relative_to(ROOT))
    for lang, line, _ in fenced_blocks(path):
        assert lang, f"{name}:{line - 1}: a code fence without a language (python runs in CI; " \
                     "use bash, yaml or text for what must not run)"
        assert lang not in REFUSED, f"{name}:{line - 1}: fence language {lang!r}: write python " \
                                    "(it runs in CI) or text"


def test_a_broken_block_fails_naming_file_and_line(tmp_path):
    doc = tmp_path / "broken.md"
    doc.write_text("# t\n\n```python\nx = 1\n```\n\ntext\n\n```python\ny = x + 1\nundefined_name\n```\n")
    blocks = [(line, code) for lang, line, code in fenced_blocks(doc) if lang == "python"]
    assert [line for line, _ in blocks] == [4, 10]
    result = run_blocks("broken.md", blocks, tmp_path, timeout=60)
    assert result.returncode == 1
    assert "DOCS BLOCK FAILED: broken.md:10" in result.stderr
    assert 'File "broken.md", line 11' in result.stderr and "undefined_name" in result.stderr


def test_node_conventions_rendered_in_the_guide():
    """The node's additions to the conventions (``mechnode.ros.services.NODE_CONVENTIONS``, written
    once there) appear verbatim in the guide; read from the source, so no ROS is needed."""
    import ast
    tree = ast.parse((ROOT / "mechnode" / "ros" / "services.py").read_text(encoding="utf-8"))
    values = [ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
              and any(getattr(t, "id", None) == "NODE_CONVENTIONS" for t in node.targets)]
    assert len(values) == 1
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    assert values[0] in guide, "docs/guide.md: render mechnode/ros/services.py NODE_CONVENTIONS verbatim"


def heading_anchors(path: Path) -> set[str]:
    """GitHub's anchors of the headings of ``path`` (lower case, punctuation dropped, spaces to
    hyphens), outside code blocks."""
    anchors, in_code = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line) or (in_code and line.startswith("```")):
            in_code = not in_code
            continue
        if not in_code and line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    name = str(path.relative_to(ROOT))
    text = path.read_text(encoding="utf-8")
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        where = f"{name}:{text.count(chr(10), 0, m.start()) + 1}: link {target!r}"
        dest = (path.parent / file_part).resolve() if file_part else path
        assert dest.exists(), f"{where}: no such file"
        if anchor:
            assert anchor in heading_anchors(dest), f"{where}: no heading with that anchor"
