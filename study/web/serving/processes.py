"""Server processes sharing one study database: who is alive, who runs the clock, and which
participant connections each one serves.

Several ``study serve`` processes may serve one study behind a load balancer. They agree
through the database they already share: each writes a heartbeat, exactly one holds the
round scheduler's lease (renewed with the heartbeat, taken over when it lapses), and each
records its live connections so the console counts all of them and each process's clock
keeps the rounds of the people connected to it (``shares``). The heartbeats also tell a
starting process whether the study was down (no other process alive) and since when.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections import Counter
from collections.abc import Callable
from typing import Any

from study.storage.database import Storage
from study.web.serving import shares

HEARTBEAT_SECONDS = 0.5
# A lease lapses this long after its last renewal, so a dead holder's rounds are taken over
# within HEARTBEAT_SECONDS + LEASE_SECONDS (2 s).
LEASE_SECONDS = 1.5
# A process not seen for this long is dead: its connections no longer count.
ALIVE_SECONDS = 2.0
SCHEDULER_LEASE = "round-scheduler"


class Processes:
    """This process's view of the study's server processes."""

    def __init__(self, storage: Storage, clock: Callable[[], float]) -> None:
        self.storage = storage
        self.clock = clock
        self.id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"

    # --- liveness -----------------------------------------------------------------------

    def others_alive(self) -> bool:
        """Whether another process showed a sign of life within ``ALIVE_SECONDS``."""
        row = self.storage.one("SELECT count(*) AS n FROM processes WHERE id != ? AND "
                               "last_seen > ?", (self.id, self.clock() - ALIVE_SECONDS))
        return bool(row and row["n"])

    def last_sign_of_life(self) -> float | None:
        """When any process of this study was last seen (before this one started)."""
        row = self.storage.one("SELECT max(last_seen) AS at FROM processes WHERE id != ?",
                               (self.id,))
        return row["at"] if row else None

    def beat(self) -> bool:
        """Write this process's heartbeat (with the seconds it has held the write lock and
        waited for another's, and its syncs of the log and their seconds) and renew or
        take the scheduler's lease; returns whether this process holds the lease. One
        transaction, so two processes never both take a lapsed lease."""
        now = self.clock()
        syncs, sync_seconds = self.storage.syncs()
        with self.storage.event() as db:
            db["processes"].upsert({"id": self.id, "pid": os.getpid(),
                                    "host": socket.gethostname(), "last_seen": now,
                                    "lock_wait": self.storage.lock_wait,
                                    "lock_held": self.storage.lock_held,
                                    "syncs": syncs, "sync_seconds": sync_seconds}, pk="id")
            db.execute("UPDATE processes SET started_at = ? WHERE id = ? AND started_at IS "
                       "NULL", (now, self.id))
            lease = self.storage.one("SELECT * FROM leases WHERE name = ?", (SCHEDULER_LEASE,))
            if lease is not None and lease["holder"] != self.id and lease["expires_at"] > now:
                return False
            db["leases"].upsert({"name": SCHEDULER_LEASE, "holder": self.id,
                                 "expires_at": now + LEASE_SECONDS, "renewed_at": now},
                                pk="name")
            return True

    def share(self, holding: bool) -> shares.Share | None:
        """The rounds this process's clock keeps (``shares``): where several processes
        share the study, its own people's, and the lease holder also those of people
        connected to no other live process; alone, the holder keeps every round and a
        process without the lease none."""
        if not self.storage.shared_file:
            return shares.EVERYONE if holding else None
        if holding:
            return shares.unclaimed(self.id, self.clock() - ALIVE_SECONDS)
        return shares.connected_here(self.id)

    def leave(self) -> None:
        """A clean stop: give up the lease and the connections at once."""
        with self.storage.event() as db:
            db.execute("DELETE FROM leases WHERE holder = ?", (self.id,))
            db.execute("DELETE FROM connections WHERE process = ?", (self.id,))
            db.execute("DELETE FROM processes WHERE id = ?", (self.id,))

    def forget_dead(self) -> None:
        """Drop the connections of processes that died without saying goodbye."""
        with self.storage.event() as db:
            db.execute("DELETE FROM connections WHERE process NOT IN (SELECT id FROM "
                       "processes WHERE last_seen > ?) AND process != ?",
                       (self.clock() - ALIVE_SECONDS, self.id))

    # --- connections --------------------------------------------------------------------

    def connected(self, sid: str, code: str) -> None:
        with self.storage.event() as db:
            db["connections"].upsert({"sid": sid, "process": self.id, "code": code,
                                      "at": self.clock()}, pk="sid")

    def disconnected(self, sid: str) -> None:
        with self.storage.event() as db:
            db.execute("DELETE FROM connections WHERE sid = ?", (sid,))

    def connected_elsewhere(self, codes: set[str]) -> set[str]:
        """Those of ``codes`` that another process (alive or not yet forgotten) holds a
        connection of: a push for them must go through the message queue. One query for
        a flush's pushes (two a message in a team of three)."""
        if not codes:
            return set()
        marks = ", ".join("?" * len(codes))
        return {row["code"] for row in self.storage.all(
            f"SELECT DISTINCT code FROM connections WHERE process != ? AND code IN ({marks})",
            (self.id, *codes))}

    def alive(self) -> list[dict[str, Any]]:
        """The live processes, oldest first, each with the shares of its time since it
        started that it held the write lock and waited for another process's: whether the
        study's workers still answer, how near they are to the one writer's limit, and how
        much sharing the database costs them (the console)."""
        now = self.clock()
        rows = self.storage.all(
            "SELECT id, pid, host, started_at, lock_wait, lock_held FROM processes "
            "WHERE last_seen > ? AND started_at IS NOT NULL ORDER BY started_at, id",
            (now - ALIVE_SECONDS,))
        return [{"pid": row["pid"], "host": row["host"], "this": row["id"] == self.id,
                 "started_at": row["started_at"],
                 **{f"{column}_share": round((row[column] or 0.0)
                                             / max(now - row["started_at"], 1.0), 3)
                    for column in ("lock_wait", "lock_held")}}
                for row in rows]

    def connection_counts(self) -> Counter[str]:
        """Live connections per participant code, over every live process."""
        rows = self.storage.all(
            "SELECT code, count(*) AS n FROM connections WHERE process = ? OR process IN "
            "(SELECT id FROM processes WHERE last_seen > ?) GROUP BY code",
            (self.id, self.clock() - ALIVE_SECONDS))
        return Counter({row["code"]: row["n"] for row in rows})
