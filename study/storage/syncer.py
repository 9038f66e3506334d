"""The helper that syncs a gevent worker's write-ahead log under full durability
(``study.storage.wal_sync.SyncProcess``): each line it reads names a file to fsync, and it
answers each with a line, ``ok`` or what went wrong. It ends with its input, when the
worker closes it or ends."""

from __future__ import annotations

import sys
from pathlib import Path

from study.storage.wal_sync import fsync_file


def main() -> int:
    for line in sys.stdin.buffer:
        try:
            fsync_file(Path(line.decode().rstrip("\n")))
            answer = "ok"
        except OSError as error:
            answer = f"{type(error).__name__}: {error}".replace("\n", " ")
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
