"""Built-in target families; importing this package registers them."""

from fuzz.targets import softmax  # noqa: F401
