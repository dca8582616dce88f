"""``python -m mechnode.demo``: the README's main job (see :mod:`mechnode.demo`)."""
import sys

from mechnode.demo import main

sys.exit(main())
