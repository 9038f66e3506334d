"""A small disk (a tmpfs) and a file that fills it."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``directory``, unmounted afterwards."""
    directory.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                           str(directory)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True)


def fill(disk: Path) -> Path:
    """Fill the disk with one file, to the last byte."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError:
            pass
        try:
            while True:
                out.write(b"\0")
        except OSError:
            pass
    return filler
