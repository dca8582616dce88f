"""``python -m mechnode --ros-args --params-file mechnode/params/cartpole_params.yaml``"""
from .cli import main

raise SystemExit(main())
