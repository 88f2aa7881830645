"""Built-in target families; importing this package registers them."""

from fuzz.targets import simple_gla, softmax  # noqa: F401
