"""The one exception type of mechnode's input checks (ROS-free)."""


class InputError(ValueError):
    """A state, reference or request that cannot be used; the message says why."""
