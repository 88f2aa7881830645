"""Built-in target families; importing this package registers them."""

from fuzz.targets import attention, jagged_softmax, simple_gla, softmax  # noqa: F401
