"""Built-in target families; importing this package registers them."""

from fuzz.targets import softmax  # noqa: F401
from fuzz.targets import attention  # noqa: F401
