"""Files the harness writes for readers that may look at any moment (reports, reproducers).

Each is written atomically: a reader sees the old file or the new one, never half of it, and the
new file gets the mode the umask gives (0644, scripts 0755, under the usual 022).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    """The process's umask, read without changing it where the system says it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode(*, executable: bool = False) -> int:
    """The mode ``open()`` would give a new file here (0644 or 0755 under the usual umask 022):
    the temporary file of an atomic write is created 0600 whatever the umask."""
    return (0o777 if executable else 0o666) & ~_umask()


def atomic_write_text(path: str | os.PathLike[str], text: str, *, executable: bool = False) -> None:
    """Writes ``text`` to ``path`` so that a reader sees the old or the new file, never half; the
    file gets the mode the umask gives a new file (``executable``: a script's)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), new_file_mode(executable=executable))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
