"""Build the API reference (HTML, pdoc) from the docstrings; any warning fails the build.

    .venv/bin/python scripts/build_api_docs.py [OUTPUT_DIR]      # default: build/api

Documents ``core``'s public API (the names in ``core.__all__``, pdoc follows ``__all__``, and the
public modules ``core.errors``, ``core.datatypes``, ``core.validation``, ``core.data``) and
``mechnode`` (every module but the test harness ``mechnode.testing``), and the modules of the
classes ``System`` and ``MidpointVI`` inherit their methods from (:data:`MODULES`). Importing ``mechnode``'s
modules needs rclpy and ``mechnode_interfaces``, which ``scripts/setup_ros.sh`` installs into
``.venv``. Called by ``scripts/test.sh``; ``build/`` is ignored by git. Docstrings are read as
Google style (``Args:``, ``Returns:``) with reST roles (``:func:`...``` becomes a link); the few
NumPy-style sections (``Parameters`` / ``----------``) render as headed plain text.

Warnings are errors, except one that is pdoc's, not the docstrings': for a ``NamedTuple`` whose
fields are annotated under ``from __future__ import annotations`` (``core.datatypes.Controllability``),
pdoc evaluates the generated ``__new__``'s annotations in the namespace of ``collections``
instead of the defining module, so ``np.ndarray`` is "not defined". Only that exact message is
let through.
"""
from __future__ import annotations

import re
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: besides core's public modules (``core.PUBLIC_MODULES``, read in :func:`main`). The modules of the
#: classes ``System`` and ``MidpointVI`` are made of are listed too: pdoc shows a class's inherited
#: members only when their class is documented, and there each is documented once.
MODULES = ["core", "core.model.description", "core.continuous.evaluation", "core.discrete.states",
           "core.discrete.rollouts", "mechnode", "!mechnode.testing"]
#: pdoc's known false alarm (see the module docstring); matched exactly, nothing else is allowed.
PDOC_NAMEDTUPLE_ANNOTATION = re.escape(
    "Error parsing type annotation ForwardRef('np.ndarray') for core.datatypes.Controllability.__init__. "
    "Import of np failed: name 'np' is not defined")


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "build" / "api"
    sys.path.insert(0, str(ROOT))
    t0 = time.monotonic()
    import pdoc
    import pdoc.render

    import core

    pdoc.render.configure(docformat="google", show_source=False,
                          footer_text="mechnode API reference")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*MODULES, *(f"core.{m}" for m in core.PUBLIC_MODULES), output_directory=out)
    problems = [w for w in caught
                if not re.fullmatch(PDOC_NAMEDTUPLE_ANNOTATION, str(w.message))
                # third-party deprecations raised while importing (numba, rclpy) are not ours
                and not (issubclass(w.category, DeprecationWarning) and "site-packages" in w.filename)]
    for w in problems:
        print(f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}", file=sys.stderr)
    pages = sum(1 for _ in out.rglob("*.html"))
    if problems:
        print(f"API reference: {len(problems)} warning(s); failing", file=sys.stderr)
        return 1
    expected = ["core.html", "mechnode/ros/node.html", *(f"core/{m}.html" for m in core.PUBLIC_MODULES)]
    missing = [page for page in expected if not (out / page).is_file()]
    if missing:
        print(f"API reference: {', '.join(missing)} missing in {out}", file=sys.stderr)
        return 1
    print(f"API reference: {pages} pages in {out} ({time.monotonic() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
