"""The README's commands do what it says they do, for a new user: the quick start's install line
where the user is root and there is no sudo, the plugin command under pytest running the user's
targets only."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _bash_blocks(after: str) -> list[str]:
    """The ``bash`` code blocks of the README section whose heading is ``after``."""
    section = README.split(after, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, re.S)


STUB = '#!/bin/sh\necho "${{0##*/}} $*" >> {log}\n'  # records its call; nothing else on PATH


def _install_lines() -> str:
    (block,) = _bash_blocks("## Quick start")
    lines = block.splitlines()
    last = max(i for i, line in enumerate(lines) if "apt-get" in line)
    return "\n".join(lines[: last + 1]) + "\n"


def _run_with(tmp_path, commands: list[str]):
    """The quick start's install lines under bash with only stubs of ``commands`` on PATH;
    returns (exit status, the stubs' calls)."""
    stubs, log = tmp_path / "bin", tmp_path / "calls.log"
    stubs.mkdir()
    for name in commands:
        (stubs / name).write_text(STUB.format(log=shlex.quote(str(log))))
        (stubs / name).chmod(0o755)
    proc = subprocess.run(
        ["/bin/bash", "-e", "-c", _install_lines()],
        env={"PATH": str(stubs), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return proc.returncode, proc.stderr, calls


def test_the_quick_start_installs_as_root_without_sudo(tmp_path):
    # `sudo apt-get ...` failed where the user is root and no sudo exists (a container).
    code, err, calls = _run_with(tmp_path, ["apt-get"])
    assert code == 0, err
    assert calls == ["apt-get update", "apt-get install -y redis-server chromium"]


def test_the_quick_start_installs_with_sudo_where_there_is_one(tmp_path):
    code, err, calls = _run_with(tmp_path, ["apt-get", "sudo"])
    assert code == 0, err
    assert calls == ["sudo apt-get update", "sudo apt-get install -y redis-server chromium"]


PLUGIN = """
import torch

import fuzz


def softmax(x, *, mask, scale):
    s = x.float() * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1).to(x.dtype)


fuzz.fuzz_kernel(
    "my_softmax",
    family="softmax",
    kernel=softmax,
    capabilities=fuzz.Capabilities(dtypes=("float32",), features={"mask", "scale"}),
)
"""


def test_the_plugin_command_under_pytest_collects_the_users_targets_only(tmp_path):
    # The README's `pytest --plugin my_kernels.py ...` collected the whole suite (1,323 tests,
    # one of them the user's). Run as written from the checkout (collected only), with the ci
    # profile where the README says gpu (this machine may have no GPU).
    (line,) = [
        ln
        for block in _bash_blocks("## Fuzz your own kernel")
        for ln in block.splitlines()
        if ln.startswith("pytest ") and "--plugin my_kernels.py" in ln
    ]
    argv = shlex.split(line, comments=True)
    plugin = tmp_path / "my_kernels.py"
    plugin.write_text(PLUGIN)
    argv = [str(plugin) if a == "my_kernels.py" else a.replace("=gpu", "=ci") for a in argv[1:]]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *argv, "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    collected = [ln for ln in proc.stdout.splitlines() if "::" in ln]
    assert collected, proc.stdout[-3000:]
    assert all("[my_softmax-" in ln for ln in collected), collected[:20]
