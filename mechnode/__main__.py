"""``python -m mechnode --ros-args --params-file config/cartpole_params.yaml``"""
from mechnode.cli import main

raise SystemExit(main())
