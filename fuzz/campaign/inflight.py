"""A worker's *in-flight record*: the example it is about to run, persisted before every launch.

``<prefix>.npz`` holds the inputs and ``<prefix>.json`` the target, backend, parameters and
property parameters drawn so far, each written atomically, so that whatever ends the worker --
a segfault, an abort, a lost CUDA context, the OOM killer, a kill for a hang -- the example
survives it (:mod:`fuzz.campaign.faults` turns it into a finding with a reproducer).
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

# What a full disk (or a full quota) raises.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(e: BaseException) -> bool:
    """Whether ``e`` says the disk (or the user's quota) is full."""
    return isinstance(e, OSError) and e.errno in DISK_FULL


def _atomic_bytes(path: Path, data: bytes) -> None:
    """Writes ``data`` to ``path`` through a temporary file and a rename (a reader, the campaign
    after a crash included, sees the old or the new record, never half), removing the temporary
    file if the write fails. Not fsync'ed: the record is written before every example and must
    survive the process (the page cache does), not the machine; an fsync measured 2.5 ms per
    write here, several per example."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_inflight_case(prefix: str, target: str, backend: str, case: Any) -> None:
    """Persists ``case`` (atomically) as the example about to run."""
    import io

    from fuzz.arrays import dtype_name

    arrays = {}
    dtypes = {}
    for k, a in case.inputs.items():
        dtypes[k] = dtype_name(a.dtype)
        arrays[k] = a.view(np.uint16) if dtypes[k] == "bfloat16" else a
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    _atomic_bytes(Path(prefix + ".npz"), buf.getvalue())
    meta = {
        "target": target,
        "backend": backend,
        "params": case.params_json(),
        "recipe": json.loads(json.dumps(dict(case.recipe), default=str)),
        "dtypes": dtypes,
        "property_params": {},
        "started": time.time(),
        "worker_pid": os.getpid(),
        "campaign_pid": os.getppid(),
    }
    _atomic_bytes(Path(prefix + ".json"), json.dumps(meta).encode())


def note_inflight_param(prefix: str, name: str, value: Any) -> None:
    """Adds a property parameter drawn for the example in flight (before the launch using it)."""
    path = Path(prefix + ".json")
    meta = json.loads(path.read_text())
    meta["property_params"][name] = value
    _atomic_bytes(path, json.dumps(meta).encode())


def read_inflight(prefix: str) -> tuple[dict[str, Any], Any] | None:
    """The in-flight record (meta, Case), or None if there is none or it cannot be read."""
    from fuzz.arrays import np_dtype
    from fuzz.case import Case

    try:
        meta = json.loads(Path(prefix + ".json").read_text())
        with np.load(prefix + ".npz", allow_pickle=False) as z:
            inputs = {}
            for k, dt in meta["dtypes"].items():
                a = z[k]
                inputs[k] = a.view(np_dtype(dt)) if dt == "bfloat16" else a
    except (OSError, ValueError, KeyError):
        return None
    return meta, Case(inputs, meta["params"], meta.get("recipe", {}))


def clear_inflight(prefix: str) -> None:
    for suffix in (".json", ".npz"):
        try:
            os.unlink(prefix + suffix)
        except FileNotFoundError:
            pass
