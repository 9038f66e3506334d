"""A module fixture's study, run once for the whole test run rather than once on every
pytest-xdist process that takes one of the module's tests: the in-process studies behind
the analysis tests take half a minute each, and ``--dist load`` spreads a module's
tests over several processes."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], None]) -> Path:
    """A private copy of the directory ``build`` fills, built by the first process that
    asks for ``name`` while the others wait for it (an OS file lock). A build that fails
    is not kept: the next process builds again, and fails in its own test."""
    private = tmp_path_factory.mktemp(name)
    if "PYTEST_XDIST_WORKER" not in os.environ:  # one process: nothing to share
        build(private)
        return private
    run = tmp_path_factory.getbasetemp().parent  # the run's folder, above each process's
    shared = run / f"once-{name}"
    built = run / f"once-{name}.built"  # the build finished (its paths stay where it ran)
    with open(run / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            build(shared)
            built.touch()
    shutil.copytree(shared, private, dirs_exist_ok=True)
    return private
