"""Code for tests, demos and benchmarks, never imported by the node's runtime modules.

* :mod:`mechnode.testing.harness`: start the node as a process, drive its lifecycle, call
  services with bounded waits;
* :mod:`mechnode.testing.sim`: :class:`~mechnode.testing.sim.SimRobot`, the variational
  integrator as a simulated robot over ROS 2.
"""
