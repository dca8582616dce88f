"""The ``mechnode`` command: start the node without ``ros2 launch``.

    mechnode [--autostart] [--threads N] --ros-args --params-file config/cartpole_params.yaml

(``config/`` of the repository; installed: ``share/mechnode/config``, which ``--help`` names.)

ROS arguments (``--ros-args ...``: parameter files, ``-p name:=value``, remappings such as
``-r __ns:=/robot``) are handled by rclpy. The node starts unconfigured (a lifecycle manager
drives it through ``configure`` and ``activate``) unless ``--autostart`` is given or the
parameter ``autostart`` is true. Exits (status 0) after the ``shutdown`` lifecycle transition
and on SIGINT/SIGTERM.
"""
from __future__ import annotations

import argparse
import faulthandler
import sys
import time

from mechnode.ros.middleware import middleware_environment


def _config_epilog() -> str:
    """Where the parameter files shipped with mechnode are (mechnode.paths, the one lookup)."""
    from mechnode.paths import config_dir
    try:
        return f"parameter files shipped with mechnode: {config_dir()}"
    except FileNotFoundError as exc:
        return str(exc)


def main(argv=None) -> int:
    """``argv``: the arguments after the program name (default ``sys.argv[1:]``)."""
    argv = ["mechnode"] + list(sys.argv[1:] if argv is None else argv)
    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
    from rclpy.utilities import remove_ros_args

    parser = argparse.ArgumentParser(prog="mechnode", description=__doc__, epilog=_config_epilog(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--autostart", action="store_true",
                        help="configure and activate right away (also: parameter autostart)")
    parser.add_argument("--threads", type=int, default=4,
                        help="executor threads (default %(default)s)")
    parser.add_argument("--switch-interval", type=float, default=None, metavar="SECONDS",
                        help="Python's GIL switch interval (default: Python's, 0.005)")
    args = parser.parse_args(remove_ros_args(argv)[1:])
    # a crash of the interpreter (a signal such as SIGSEGV) prints every thread's Python stack
    # to stderr: the node's log says where it died
    faulthandler.enable()

    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    middleware_environment()
    rclpy.init(args=argv)  # rclpy's SIGINT/SIGTERM handlers shut the context down
    from mechnode.ros.node import MechNode

    try:
        node = MechNode()
    except Exception as exc:  # noqa: BLE001 - e.g. a parameter file value that fails validation
        print(f"mechnode: cannot start: {type(exc).__name__}: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = MultiThreadedExecutor(num_threads=max(2, args.threads))
    executor.add_node(node)
    try:
        if args.autostart or node.get_parameter("autostart").value:
            from rclpy.lifecycle import TransitionCallbackReturn
            ok = node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            ok = ok and node.trigger_activate() == TransitionCallbackReturn.SUCCESS
            if not ok:
                node.get_logger().error("autostart: configure/activate failed; the node stays up "
                                        "for its lifecycle services")
        executor.spin_until_future_complete(node.finished)
        # the shutdown transition's answer is on its way: keep serving briefly so it is sent
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline and rclpy.ok(context=node.context):
            executor.spin_once(timeout_sec=0.05)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        try:
            executor.shutdown(timeout_sec=2.0)
            node.destroy_node()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
