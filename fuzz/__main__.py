"""``python -m fuzz``."""

import sys

from fuzz.cli import main

if __name__ == "__main__":
    sys.exit(main())
