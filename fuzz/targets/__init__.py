"""Built-in target families; importing this package registers them."""

from fuzz.targets import attention, softmax  # noqa: F401
