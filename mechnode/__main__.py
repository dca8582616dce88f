"""``python -m mechnode --ros-args --params-file config/params/cartpole_params.yaml``"""
from .cli import main

raise SystemExit(main())
