"""The sync helper (``python -m study.storage.syncer``): one answer a line, in order, and an
error said rather than a sync pretended; it ends with its input."""

from __future__ import annotations

import subprocess
import sys

from support.storage import HANG


def test_the_helper_answers_each_file_in_order_and_ends_with_its_input(tmp_path):
    log = tmp_path / "study.sqlite-wal"
    log.write_bytes(b"frames")
    gone = tmp_path / "checkpointed-and-removed-wal"
    unsyncable = "/proc/self/status"  # the kernel refuses to fsync it (EINVAL)
    run = subprocess.run([sys.executable, "-m", "study.storage.syncer"],
                         input=f"{log}\n{gone}\n{unsyncable}\n{log}\n", capture_output=True,
                         text=True, timeout=HANG, check=True)
    answers = run.stdout.splitlines()
    assert answers[:2] == ["ok", "ok"]
    assert answers[2].startswith("OSError") and "Invalid argument" in answers[2]
    assert answers[3:] == ["ok"]
