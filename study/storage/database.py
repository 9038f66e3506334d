"""The study database: SQLite through sqlite-utils, one transaction per event.

A participant's data must survive a crash at any moment, so every event is committed before
it is acknowledged (WAL; under ``full`` durability also on the disk, see ``WalSync``) and
nothing lives only in memory. Columns are explained in
``docs/database.md``. One connection per process serves its participants behind a lock, and
events of the process that queue behind a transaction share its commit: SQLite has a single
writer anyway.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import sqlite_utils

from study.storage.checkpointer import FALLBACK_PAGES, INTERVAL_SECONDS, Checkpointer
from study.storage.health import StorageHealth, StorageUnavailable, is_storage_fault
from study.storage.wal_sync import WalSync, cooperative

REAL, INT, TEXT = float, int, str
# The most events one commit carries: a batch's first event waits for the others' work.
BATCH_LIMIT = 16
# How long a batch's first event waits for others to join its commit (under gevent, or with
# events queued behind it), by durability. Under ``full`` every commit is made durable by a
# sync of the log, which the events sharing a commit share: at 1,000 people two workers
# answered in a p95 of 17 ms with the wait and 41 ms without. Under ``normal`` a commit
# waits for no disk, and the events ready at once share it all the same (one yield): the
# wait only delayed the demo's answers, a p95 of 10 against 6-7 ms on one worker and 18-20
# against 11-12 on two, at no saving of CPU (docs/measurements/capacity-log.md). Where
# processes share the file, the wait comes before the write lock is taken, not while it is
# held: the others would wait for it (``Storage.shared_file``).
COMMIT_WINDOWS = {"full": 0.002, "normal": 0.0}
# Where processes share the file, the first event of a commit gathers the others at least
# this long before it asks for the write lock when its process's last turn at the lock had
# to wait for another's: the lock is then what the processes queue for, and each turn
# should carry more. Real teams of three at 1,000 people on two workers under normal
# durability answered in a p95 of 50 and 55 ms with it, against 36, 183 and 1,279 ms
# without (docs/measurements/capacity-log.md).
CONTENDED_WINDOW = 0.002
# How many query texts' columns a connection remembers (``Storage._names``).
QUERIES_REMEMBERED = 1_000
# How long a write waits for another process's transaction before it gives up.
BUSY_TIMEOUT_SECONDS = 30
# What an acknowledged event survives. ``full``: a power cut (its commit is on the disk:
# ``WalSync`` runs one fsync of the write-ahead log for every commit made before it).
# ``normal``: a crash of the server (its commit is with the operating system); a power cut
# or an operating-system crash may lose the events since the last checkpoint (the database
# stays consistent). SQLite itself commits with ``synchronous=NORMAL`` under both: in WAL
# mode that writes the log without fsync and syncs it before each checkpoint.
DURABILITIES = ("full", "normal")
# How long the checkpoint after a withdrawal waits for other connections' readers.
CHECKPOINT_WAIT_SECONDS = 1.0
# What a write-ahead log keeps of its size once checkpointed: space a full disk once gave it
# goes back to the filesystem.
JOURNAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024

# table -> (columns, not-null columns, foreign keys, unique column groups)
SCHEMA: dict[str, tuple[dict[str, type], set[str], list[tuple[str, str]], list[list[str]]]] = {
    "participants": (
        {"id": INT, "code": TEXT, "protocol": TEXT, "created_at": REAL, "step": TEXT,
         "condition_order": TEXT, "external_ids": TEXT, "consent": TEXT, "consent_at": REAL,
         "data_consent": TEXT, "finished_at": REAL, "withdrawn_at": REAL,
         "robots_identical": INT, "recruitment_id": TEXT, "origin": TEXT, "themes": TEXT,
         "themes_rule": TEXT, "withdrawn_from": TEXT, "tie_preferred": INT},
        {"code", "protocol", "created_at", "step"}, [], [["code"]]),
    "steps": (
        {"id": INT, "participant_id": INT, "step": TEXT, "at": REAL},
        {"participant_id", "step", "at"}, [("participant_id", "participants")], []),
    "sessions": (
        {"id": INT, "participant_id": INT, "number": INT, "kind": TEXT, "condition": TEXT,
         "algorithm": TEXT, "robot": TEXT, "w": REAL, "fea_lo": REAL, "fea_hi": REAL,
         "round_order": TEXT, "participant_human": INT, "team_c": TEXT, "team_p": TEXT,
         "goal": TEXT, "plan": TEXT, "reward": REAL, "rounds": INT, "created_at": REAL,
         "finished_at": REAL, "team_id": INT, "algorithm_declaration": TEXT, "history": TEXT},
        {"participant_id", "number", "kind", "rounds", "created_at"},
        [("participant_id", "participants")], [["participant_id", "number"]]),
    "rounds": (
        {"id": INT, "session_id": INT, "participant_id": INT, "number": INT, "task_type": INT,
         "task_name": TEXT, "teammate_task_type": INT, "theme": TEXT, "teammate_theme": TEXT,
         "started_at": REAL, "deadline": REAL,
         "seconds": REAL, "closed_at": REAL, "close_reason": TEXT, "participant_cookies": INT,
         "teammate_cookies": INT, "alive_until": REAL, "close_delay": REAL,
         "team_round_id": INT},
        {"session_id", "participant_id", "number", "task_type", "started_at", "deadline",
         "seconds", "participant_cookies", "teammate_cookies"},
        [("session_id", "sessions"), ("participant_id", "participants")],
        [["session_id", "number"]]),
    "allocations": (
        {"id": INT, "round_id": INT, "session_id": INT, "participant_id": INT, "round": INT,
         "human": INT, "role": TEXT, "task_type": INT, "task_name": TEXT, "held_before": TEXT,
         "at": REAL},
        {"round_id", "session_id", "participant_id", "round", "human", "role", "task_type",
         "at"},
        [("round_id", "rounds"), ("session_id", "sessions"),
         ("participant_id", "participants")], [["round_id", "human"]]),
    "cookies": (
        {"id": INT, "round_id": INT, "participant_id": INT, "actor": TEXT, "number": INT,
         "task_type": INT, "task_name": TEXT, "finished_at": REAL, "seconds": REAL,
         "content": TEXT, "msg_id": TEXT},
        {"round_id", "participant_id", "actor", "number", "task_type", "finished_at",
         "seconds"},
        [("round_id", "rounds"), ("participant_id", "participants")],
        [["round_id", "actor", "number"]]),
    "progress": (
        {"id": INT, "round_id": INT, "participant_id": INT, "cookie": INT, "at": REAL,
         "placed": INT, "correct": INT, "fraction": REAL, "msg_id": TEXT, "content": TEXT},
        {"round_id", "participant_id", "cookie", "at", "placed", "correct", "fraction"},
        [("round_id", "rounds"), ("participant_id", "participants")], []),
    "answers": (
        {"id": INT, "participant_id": INT, "questionnaire": TEXT, "session_id": INT,
         "condition": TEXT, "item": TEXT, "label": TEXT, "value_number": REAL,
         "value_text": TEXT, "at": REAL},
        {"participant_id", "questionnaire", "item", "at"},
        [("participant_id", "participants"), ("session_id", "sessions")],
        [["participant_id", "questionnaire", "item"]]),
    "measurements": (
        {"id": INT, "participant_id": INT, "kind": TEXT, "task_type": INT, "task_name": TEXT,
         "value": REAL, "round_id": INT, "cookies": INT, "seconds": REAL, "speed": REAL,
         "reference_speed": REAL, "theme": TEXT, "rating": INT, "fraction": REAL,
         "cut_by_downtime": INT, "theme_scale": REAL, "clipped": INT, "implausible": TEXT,
         "at": REAL},
        {"participant_id", "kind", "task_type", "value", "at"},
        [("participant_id", "participants"), ("round_id", "rounds")],
        [["participant_id", "kind", "task_type"]]),
    "teammates": (
        {"participant_id": INT, "pool": TEXT, "pool_team": INT, "participant_human": INT,
         "distance": REAL, "rule": TEXT, "nearest_team": INT, "nearest_human": INT,
         "nearest_distance": REAL, "passed_over": INT, "passed_same_plan": INT,
         "passed_off_target": INT, "live_type": TEXT, "participant_role": TEXT,
         "target_met": INT, "c_squares": REAL, "c_letters": REAL,
         "p_squares": REAL, "p_letters": REAL, "at": REAL},
        {"participant_id", "pool", "pool_team", "participant_human", "distance", "at"},
        [("participant_id", "participants")], []),
    "probes": (
        {"id": INT, "participant_id": INT, "session_id": INT, "round_id": INT,
         "session_number": INT, "round_number": INT, "probe": TEXT, "shown_at": REAL,
         "deadline": REAL, "answered_at": REAL, "value": INT, "missed": INT},
        {"participant_id", "session_id", "round_id", "session_number", "round_number",
         "probe", "deadline", "missed"},
        [("participant_id", "participants")], [["participant_id", "round_id", "probe"]]),
    "messages": (
        {"id": INT, "participant_id": INT, "msg_id": TEXT, "event": TEXT, "at": REAL},
        {"participant_id", "msg_id", "event", "at"}, [("participant_id", "participants")],
        [["participant_id", "msg_id"]]),
    "rejections": (
        {"id": INT, "participant_id": INT, "event": TEXT, "msg_id": TEXT, "reason": TEXT,
         "detail": TEXT, "payload": TEXT, "at": REAL},
        {"event", "reason", "at"}, [("participant_id", "participants")], []),
    "rejection_counts": (
        {"id": INT, "participant_id": INT, "reason": TEXT, "count": INT, "last_at": REAL},
        {"participant_id", "reason", "count", "last_at"}, [("participant_id", "participants")],
        [["participant_id", "reason"]]),
    "bindings": (
        {"id": INT, "participant_id": INT, "browser": TEXT, "bound_at": REAL, "seen_at": REAL},
        {"participant_id", "browser", "bound_at", "seen_at"},
        [("participant_id", "participants")], [["participant_id"]]),
    "lobby": (
        {"id": INT, "participant_id": INT, "entered_at": REAL, "individual_deadline": REAL,
         "left_at": REAL, "outcome": TEXT, "team_id": INT},
        {"participant_id", "entered_at"}, [("participant_id", "participants")],
        [["participant_id"]]),
    "withdrawal_links": (
        {"id": INT, "participant_id": INT, "token": TEXT, "created_at": REAL},
        {"participant_id", "token", "created_at"}, [("participant_id", "participants")],
        [["participant_id"], ["token"]]),
}

# Column defaults: a probe is not missed until its deadline passed unanswered.
DEFAULTS = {"probes": {"missed": 0}}

# A team's own tables (docs/teams.md): shared by its members, so a member's withdrawal
# deletes none of them; the seat keeps its place with ``participant_id`` cleared.
TEAM_SCHEMA: dict[str, tuple[dict[str, type], set[str]]] = {
    "teams": ({"id": INT, "protocol": TEXT, "humans": INT, "persons": INT, "formation": TEXT,
               "formed_at": REAL, "formed_by": TEXT, "condition_order": TEXT,
               "live_type": TEXT, "team_c": TEXT, "team_p": TEXT, "session": INT,
               "next_round_at": REAL, "session_started_at": REAL, "finished_at": REAL},
              {"protocol", "humans", "persons", "formation", "formed_at", "formed_by",
               "condition_order", "team_c", "team_p", "session"}),
    "seats": ({"id": INT, "team_id": INT, "seat": INT, "kind": TEXT, "participant_id": INT,
               "c_squares": REAL, "c_letters": REAL, "p_squares": REAL, "p_letters": REAL,
               "pool_team": INT, "joined_at": REAL, "away_since": REAL, "dropped_at": REAL,
               "drop_reason": TEXT, "agent_from_session": INT, "agent_from_round": INT},
              {"team_id", "seat", "kind", "joined_at"}),
    "team_rounds": ({"id": INT, "team_id": INT, "session": INT, "number": INT,
                     "condition": TEXT, "started_at": REAL, "deadline": REAL, "seconds": REAL,
                     "closed_at": REAL, "close_reason": TEXT},
                    {"team_id", "session", "number", "condition", "started_at", "deadline",
                     "seconds"}),
    "team_allocations": ({"id": INT, "team_round_id": INT, "team_id": INT, "session": INT,
                          "round": INT, "seat": INT, "task_type": INT, "task_name": TEXT,
                          "held_before": TEXT, "at": REAL},
                         {"team_round_id", "team_id", "session", "round", "seat", "task_type",
                          "at"}),
    "seat_cookies": ({"id": INT, "team_round_id": INT, "team_id": INT, "seat": INT,
                      "number": INT, "task_type": INT, "finished_at": REAL, "seconds": REAL},
                     {"team_round_id", "team_id", "seat", "number", "task_type",
                      "finished_at", "seconds"}),
}
TEAM_INDEXES = (("seats", ["team_id", "seat"], True), ("seats", ["participant_id"], False),
                ("team_rounds", ["team_id", "session", "number"], True),
                ("team_allocations", ["team_round_id", "seat"], True),
                ("seat_cookies", ["team_round_id", "seat", "number"], True))

# Tables of the server processes sharing the database (no participant data): which are
# alive, which one holds the round scheduler's lease, which connections each serves.
SERVER_SCHEMA: dict[str, tuple[dict[str, type], str]] = {
    "processes": ({"id": TEXT, "pid": INT, "host": TEXT, "started_at": REAL,
                   "last_seen": REAL, "lock_wait": REAL, "lock_held": REAL,
                   "syncs": INT, "sync_seconds": REAL}, "id"),
    "leases": ({"name": TEXT, "holder": TEXT, "expires_at": REAL, "renewed_at": REAL}, "name"),
    "connections": ({"sid": TEXT, "process": TEXT, "code": TEXT, "at": REAL}, "sid"),
    "counters": ({"name": TEXT, "count": INT, "at": REAL}, "name"),
    "console_sessions": ({"id": TEXT, "created_at": REAL, "seen_at": REAL,
                          "remote_addr": TEXT}, "id"),
}

# Tables holding a participant's data, children before parents (deletion order).
PARTICIPANT_TABLES = ("probes", "cookies", "progress", "allocations", "measurements", "answers",
                      "rounds", "teammates", "sessions", "steps", "messages", "rejections",
                      "rejection_counts", "bindings")
# A refused message's payload is kept up to this many bytes, and only for the first few
# refusals of a participant for one reason; the rest are counted (``rejection_counts``).
REJECTION_PAYLOAD_BYTES = 256
REJECTIONS_KEPT = 5


def to_json(value: Any) -> str:
    """Compact JSON. Every message's packets, size check and stored content are written
    here, and orjson writes them several times faster than the standard library (issue
    #29); what orjson refuses (integers past 64 bits, keys that are not strings, nesting
    past 254 levels, lone surrogates) the standard library writes as before."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, separators=(",", ":"))


def _capped_json(payload: Any) -> str:
    """The payload as JSON (or its repr), cut to ``REJECTION_PAYLOAD_BYTES`` characters;
    a payload too deep to serialise is named as such."""
    try:
        text = to_json(payload)
    except (TypeError, ValueError, RecursionError):
        text = repr(payload) if not isinstance(payload, dict | list) else "<too deep>"
    return text[:REJECTION_PAYLOAD_BYTES]


def tables_with_participant_rows(conn: sqlite3.Connection) -> list[str]:
    """The journey's tables in foreign-key order, then any other table with a
    ``participant_id`` (the console's notes): a withdrawal leaves nothing behind. Tables a
    database made by an earlier version lacks are left out."""
    names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                            "'table' AND name NOT LIKE 'sqlite_%'")]
    others = [name for name in names
              if name not in (*PARTICIPANT_TABLES, *TEAM_SCHEMA, "participants")
              and "participant_id" in {row[1] for row in conn.execute(
                  f"PRAGMA table_info({_quoted(name)})")}]
    return [*(name for name in PARTICIPANT_TABLES if name in names), *others]


def erase_rows(conn: sqlite3.Connection, participant_id: int) -> None:
    """Delete every row of a participant but their ``participants`` row, and take them
    out of a real team's seat (the team keeps the seat, played by an agent): what a
    withdrawal erases, in the study's database and in its kept backups."""
    for table in tables_with_participant_rows(conn):
        conn.execute(f"DELETE FROM {_quoted(table)} WHERE participant_id = ?",
                     (participant_id,))
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'seats'").fetchone():
        conn.execute("UPDATE seats SET participant_id = NULL WHERE participant_id = ?",
                     (participant_id,))


def _quoted(identifier: str) -> str:
    """An SQL identifier of the project's own schema (never participant input)."""
    if not identifier.replace("_", "").isalnum():
        raise ValueError(f"not a column or table name: {identifier!r}")
    return f'"{identifier}"'


_STORED_AS_IS = frozenset({int, float, str, bytes, type(None)})


def _sql_value(value: Any) -> Any:
    """What SQLite stores for a value: containers as JSON, numpy scalars as Python's."""
    if type(value) in _STORED_AS_IS:  # most values: one look-up, on every write
        return value
    if isinstance(value, dict | list | tuple):
        return to_json(value)
    return value.item() if hasattr(value, "item") and hasattr(value, "dtype") else value


def _ended_by(error: BaseException | None) -> BaseException:
    """The error for an event whose batch's transaction an earlier error ended."""
    if error is not None and is_storage_fault(error):
        return StorageUnavailable(f"the transaction was rolled back: {error}")
    return sqlite3.OperationalError("the transaction was rolled back by an earlier error")


class CommitBatch:
    """Events of one process that share a write transaction and its commit."""

    def __init__(self) -> None:
        self.members = 0
        self.changes = 0  # the connection's total changes when the batch began
        self.taken_at = time.monotonic()  # when its transaction took the write lock
        self.committed = threading.Event()
        self.commit = 0  # its number in ``WalSync``, once committed
        self.error: BaseException | None = None


class Storage:
    """The database of one study run; every public method is one committed event."""

    def __init__(self, path: Path | str, durability: str = "full") -> None:
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {', '.join(DURABILITIES)}, "
                             f"not {durability!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(str(self.path), check_same_thread=False,
                                     timeout=BUSY_TIMEOUT_SECONDS)
        self.db = sqlite_utils.Database(connection)
        self.lock = threading.RLock()
        self._batch: CommitBatch | None = None
        self._depth = 0  # events nested in the one holding the lock
        self._lost: BaseException | None = None  # what ended the last batch's transaction
        self._nesting = threading.local()  # this thread's events under way, for ``health``
        self.queued = 0  # events waiting for the lock
        # Seconds this process's events waited for another process's write lock: what
        # several processes sharing the file cost (the heartbeat records it).
        self.lock_wait = 0.0
        # Seconds this process held the write lock (from ``BEGIN IMMEDIATE`` to the end of
        # the transaction): the processes' holds together cannot pass the wall clock, so
        # their sum says how near a study is to its one writer's limit (the heartbeat
        # records it; docs/capacity.md, Sizing a server).
        self.lock_held = 0.0
        self._queue_lock = threading.Lock()
        # Whether other processes write the file too (``_gather``); then the first event of
        # a commit waits before it takes the write lock, and the others wait for it.
        self.shared_file = False
        self._gathering: threading.Event | None = None
        self._contended = False  # whether the last ``BEGIN IMMEDIATE`` waited (``_gather``)
        self._keys: dict[str, str] = {}
        self._inserts: dict[tuple[str, ...], str] = {}  # (table, columns) -> INSERT
        self._columns: dict[str, list[str]] = {}  # query -> the columns it returns
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.wal_sync = WalSync(Path(f"{self.path}-wal")) if durability == "full" else None
        self.commit_window = COMMIT_WINDOWS[durability]
        self.db.execute("PRAGMA foreign_keys=ON")
        # Deleted rows are overwritten, not just unlinked: a withdrawal leaves no trace in
        # the file (whatever the SQLite build's default); see ``checkpoint``.
        self.db.execute("PRAGMA secure_delete=ON")
        self.db.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT_BYTES}")
        self.health = StorageHealth()
        self.checkpoint_due = False
        self.checkpoint_retry_at = 0.0
        self.rejection_counts = RejectionCounts(self)
        self.checkpointer: Checkpointer | None = None
        self.create_schema()

    def create_schema(self) -> None:
        """Create what is missing: tables, indexes, and columns added since a database was
        made (a study continues on its database across upgrades)."""
        with self.event():
            for name, (columns, not_null, foreign_keys, uniques) in SCHEMA.items():
                pk = "participant_id" if name == "teammates" else "id"
                self.db[name].create(columns, pk=pk, not_null=not_null,
                                     foreign_keys=foreign_keys, defaults=DEFAULTS.get(name),
                                     if_not_exists=True)
                self._add_missing_columns(name, columns)
                for group in uniques:
                    self.db[name].create_index(group, unique=True, if_not_exists=True)
                for column, _ in foreign_keys:
                    if [column] in uniques or column == pk:
                        continue
                    if any(group[0] == column for group in uniques):
                        # A unique index led by the column finds its rows: another index
                        # would be one more page written by every insert.
                        self.db.execute(f"DROP INDEX IF EXISTS idx_{name}_{column}")
                    else:
                        self.db[name].create_index([column], if_not_exists=True)
            for name, (columns, pk) in SERVER_SCHEMA.items():
                self.db[name].create(columns, pk=pk, if_not_exists=True)
                self._add_missing_columns(name, columns)
            for name, (columns, not_null) in TEAM_SCHEMA.items():
                self.db[name].create(columns, pk="id", not_null=not_null, if_not_exists=True)
                self._add_missing_columns(name, columns)
            for name, group, unique in TEAM_INDEXES:
                self.db[name].create_index(group, unique=unique, if_not_exists=True)
            # The round scheduler's deadline queue: open rounds ordered by deadline.
            self.db.execute("CREATE INDEX IF NOT EXISTS rounds_open_by_deadline ON "
                            "rounds(deadline) WHERE closed_at IS NULL")
            # The probes still open, for the clock that marks them missed.
            self.db.execute("CREATE INDEX IF NOT EXISTS probes_open_by_deadline ON "
                            "probes(deadline) WHERE answered_at IS NULL AND missed = 0")
            # What the team clock reads at every tick: who has a page open, who waits in
            # the lobby, which teams still play, which team rounds are due.
            self.db.execute("CREATE INDEX IF NOT EXISTS connections_by_code ON "
                            "connections(code)")
            self.db.execute("CREATE INDEX IF NOT EXISTS lobby_waiting ON lobby(entered_at) "
                            "WHERE outcome IS NULL")
            self.db.execute("CREATE INDEX IF NOT EXISTS teams_playing ON "
                            "teams(next_round_at) WHERE finished_at IS NULL")
            self.db.execute("CREATE INDEX IF NOT EXISTS team_rounds_open_by_deadline ON "
                            "team_rounds(deadline) WHERE closed_at IS NULL")
            # The same recruitment id always finds the same participant.
            self.db.execute("CREATE UNIQUE INDEX IF NOT EXISTS participants_recruitment_id ON "
                            "participants(recruitment_id) WHERE recruitment_id IS NOT NULL")
            self.db.execute("CREATE INDEX IF NOT EXISTS participants_unconsented ON "
                            "participants(created_at) WHERE step = 'consent'")

    def _add_missing_columns(self, table: str, columns: dict[str, type]) -> None:
        present = self.db[table].columns_dict
        for column, kind in columns.items():
            if column not in present:
                self.db[table].add_column(column, kind)

    def syncs(self) -> tuple[int, float]:
        """The log's syncs so far under full durability and the seconds the commits waited
        for them (none under normal durability, whose commits wait for no disk)."""
        if self.wal_sync is None:
            return 0, 0.0
        return self.wal_sync.syncs, self.wal_sync.seconds

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.stop()
        if self.wal_sync is not None:
            self.wal_sync.close()
        with self.lock:
            self.db.close()

    def checkpoint_in_background(self, interval: float = INTERVAL_SECONDS,
                                 turn: Callable[[], bool] | None = None) -> Checkpointer:
        """Hand the log's checkpoints to a thread (``study.storage.checkpointer``), which
        checkpoints whenever ``turn`` says so (always, without it): a commit then
        checkpoints only a log grown past ``FALLBACK_PAGES``."""
        with self.lock:
            self.db.execute(f"PRAGMA wal_autocheckpoint={FALLBACK_PAGES}")
        self.checkpointer = Checkpointer(self.path, interval, turn)
        self.checkpointer.start()
        return self.checkpointer

    @contextlib.contextmanager
    def event(self) -> Iterator[sqlite_utils.Database]:
        """One event (``_event``); a disk that refuses its write (full, failing) raises
        ``StorageUnavailable``: nothing of it was stored, and the sender may try again.
        The condition is logged once a minute (``health``), not once per event."""
        outermost = not getattr(self._nesting, "depth", 0)
        self._nesting.depth = getattr(self._nesting, "depth", 0) + 1
        try:
            with self._event() as db:
                yield db
        except (sqlite3.Error, StorageUnavailable) as error:
            if not is_storage_fault(error):
                raise
            if outermost:
                self.health.failed(error)
            if isinstance(error, StorageUnavailable):
                raise
            raise StorageUnavailable(str(error)) from error
        finally:
            self._nesting.depth -= 1

    @contextlib.contextmanager
    def _event(self) -> Iterator[sqlite_utils.Database]:
        """One event: everything inside commits together, or nothing does; it returns once
        committed.

        The outermost event takes SQLite's write lock up front (``BEGIN IMMEDIATE``), so a
        read-then-write never fails half way because another process wrote in between: it
        waits its turn instead. Events of this process queued behind it meanwhile share its
        commit (group commit): each runs in its own savepoint, so a failing one leaves the
        others intact, and the first commits for all once they are in. A process waiting
        for another's write lock thus commits what piled up in one fsync rather than one
        each. Under gevent nothing queues (a greenlet runs until it waits), so the first
        event yields before committing, under ``full`` durability for ``commit_window``:
        the events of every participant whose message is ready to run, or arrives
        meanwhile, join it, up to ``BATCH_LIMIT``, and a busy process commits once for many
        messages instead of once each; where processes share the file, that wait comes
        before the lock (``_gather``). Nested events are savepoints of their outer event."""
        self._gather()
        with self._queued_for_lock():
            self.lock.acquire()
        try:
            if self._depth:
                with self._savepoint():
                    yield self.db
                return
            batch = self._open_batch()
            try:
                with self._savepoint():
                    yield self.db
            except BaseException:
                if batch.members == 0:
                    self._close_batch(batch, "ROLLBACK")
                raise
            batch.members += 1
            leads = batch.members == 1
            if leads and not self.queued and not cooperative():
                self._commit(batch)
        finally:
            self.lock.release()
        if leads and not batch.committed.is_set():
            # The events ready meanwhile (or gathered before the lock) join this commit.
            time.sleep(0 if self.shared_file else self.commit_window)
            with self.lock:
                if not batch.committed.is_set():  # unless it filled up and was committed
                    self._commit(batch)
        batch.committed.wait()
        if batch.error is not None:
            raise batch.error
        if self.wal_sync is not None and not getattr(self._nesting, "deferred", False):
            self.wal_sync.wait(batch.commit)  # acknowledged only once on the disk

    def _gather(self) -> None:
        """Where processes share the file, the first event of a commit waits
        ``commit_window`` (or yields once; ``CONTENDED_WINDOW`` at least after a turn at the
        lock that had to wait) before it takes the write lock, and the events that arrive
        meanwhile wait for it, then join its commit: the events share one commit as where a
        process writes alone, and no process waits for a lock held idle. Nested events and
        events joining an open batch go on at once."""
        if not self.shared_file or self._nesting.depth != 1 or self._batch is not None:
            return
        if self._gathering is not None:
            self._gathering.wait()
            return
        gathering = self._gathering = threading.Event()
        try:
            time.sleep(max(self.commit_window, CONTENDED_WINDOW) if self._contended
                       else self.commit_window)
        finally:
            self._gathering = None
            gathering.set()

    @contextlib.contextmanager
    def _queued_for_lock(self) -> Iterator[None]:
        """Count the events waiting for this process's lock (they join the open batch)."""
        with self._queue_lock:
            self.queued += 1
        try:
            yield
        finally:
            with self._queue_lock:
                self.queued -= 1

    @contextlib.contextmanager
    def _savepoint(self) -> Iterator[None]:
        """One event's own savepoint in the batch's transaction (named by depth: SQLite
        rolls back to the innermost savepoint of a name)."""
        conn = self.db.conn
        if not conn.in_transaction:  # a savepoint here would start a transaction of its own
            raise _ended_by(self._lost)
        self._depth += 1
        name = f"event_{self._depth}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException as error:
            # An error may have ended the whole transaction already, savepoints included
            # (SQLite rolls it back on a full disk): then the events that shared it failed.
            if conn.in_transaction:
                conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                conn.execute(f"RELEASE SAVEPOINT {name}")
            else:
                self._fail_batch(error)
            raise
        else:
            if not conn.in_transaction:  # an error inside, caught there, ended it
                error = _ended_by(self._lost)
                self._fail_batch(error)
                raise error
            conn.execute(f"RELEASE SAVEPOINT {name}")
        finally:
            self._depth -= 1

    def _fail_batch(self, error: BaseException) -> None:
        """The batch's transaction is gone: every event that shared it fails."""
        if self._lost is None:
            self._lost = error
        if self._batch is not None:
            self._batch.error = error
            self._close_batch(self._batch, "ROLLBACK")

    def _open_batch(self) -> CommitBatch:
        """The open batch, or a new one with the write lock taken (a full batch is
        committed first: its events need not wait for more)."""
        if self._batch is not None and self._batch.members >= BATCH_LIMIT:
            self._commit(self._batch)
        if self._batch is None:
            if self.db.conn.in_transaction:  # begun by a statement after its batch failed
                self.db.conn.execute("ROLLBACK")
            self._begin_immediate()
            self._batch = CommitBatch()
            self._batch.changes = self.db.conn.total_changes
            self._lost = None
        return self._batch

    def _commit(self, batch: CommitBatch) -> None:
        self._close_batch(batch, "COMMIT")
        wrote = self.db.conn.total_changes != batch.changes  # an empty commit proves nothing
        if batch.error is None and wrote and self.health.succeeded():
            self.checkpoint_due = True  # the log may hold what the full disk left in it
        if self.checkpoint_due and batch.error is None:
            self._checkpoint_quietly()

    def _close_batch(self, batch: CommitBatch, statement: str) -> None:
        """End the batch's transaction; a failed commit fails every event of the batch, and
        a batch that failed already is rolled back, never committed."""
        if batch.committed.is_set():  # ended already, when an event lost its transaction
            return
        if batch.error is not None:
            statement = "ROLLBACK"
        try:
            if self.db.conn.in_transaction or statement == "COMMIT":
                self.db.conn.execute(statement)
            if statement == "COMMIT" and self.wal_sync is not None:
                batch.commit = self.wal_sync.commit_made()
        except BaseException as error:
            batch.error = error
            if self.db.conn.in_transaction:
                self.db.conn.execute("ROLLBACK")
        finally:
            self._batch = None
            self.lock_held += time.monotonic() - batch.taken_at
            batch.committed.set()

    def _begin_immediate(self) -> None:
        """Take the write lock, waiting for other processes' transactions in short sleeps.

        SQLite's own busy handler sleeps in steps growing to 100 ms inside C, where a gevent
        server cannot run anything else and a lock freed meanwhile waits for the sleep to
        end. Here the lock is asked for at once; while another process holds it, this one
        sleeps a millisecond or so (a gevent-patched sleep lets the process's other
        participants go on) and asks again, up to the busy timeout."""
        connection = self.db.conn
        asked = time.monotonic()
        give_up = asked + BUSY_TIMEOUT_SECONDS
        delay, waited = 0.0005, False
        connection.execute("PRAGMA busy_timeout = 0")
        try:
            while True:
                try:
                    connection.execute("BEGIN IMMEDIATE")
                    self._contended = waited
                    if waited:
                        self.lock_wait += time.monotonic() - asked
                    return
                except sqlite3.OperationalError as error:
                    if "locked" not in str(error) or time.monotonic() > give_up:
                        raise
                waited = True
                time.sleep(delay)
                delay = min(delay * 2, 0.004)
        finally:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_SECONDS * 1000}")

    # --- reading ------------------------------------------------------------------------

    def one(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> dict[str, Any] | None:
        with self.lock:
            cursor = self.db.conn.execute(sql, params)
            row = cursor.fetchone()
            return None if row is None else dict(zip(self._names(sql, cursor, row), row,
                                                     strict=True))

    def all(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        with self.lock:
            cursor = self.db.conn.execute(sql, params)
            rows = cursor.fetchall()
            if not rows:
                return []
            names = self._names(sql, cursor, rows[0])
            return [dict(zip(names, row, strict=True)) for row in rows]

    def _names(self, sql: str, cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> list[str]:
        """The columns a query returns, read from the cursor once per query text: building
        them cost as much as the look-up of a participant's row. A column added since
        (``create_schema``) changes their number, and they are read again."""
        names = self._columns.get(sql)
        if names is None or len(names) != len(row):
            if len(self._columns) >= QUERIES_REMEMBERED:  # texts made with a list's length
                self._columns.clear()
            names = self._columns[sql] = [column[0] for column in cursor.description]
        return names

    def participant(self, code: str) -> dict[str, Any] | None:
        return self.one("SELECT * FROM participants WHERE code = ?", (code,))

    # --- writing ------------------------------------------------------------------------

    def insert(self, table: str, row: dict[str, Any]) -> int:
        """Insert one row (its own event when not already inside one); returns its id.

        Plain SQL on the table the schema made: every accepted message writes through here,
        and sqlite-utils' per-call table introspection cost more than the write itself."""
        cursor = self.write(self._insert_sql(table, row),
                            [_sql_value(value) for value in row.values()])
        return int(cursor.lastrowid or 0)

    def insert_all(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Insert rows of the same columns in one statement's runs (one event when not
        already inside one): a round's allocations and an agent's cookies are written in
        the scheduler's transaction, which every message waits for, and sqlite-utils'
        ``insert_all`` looked the table up on every call."""
        if not rows:
            return
        sql = self._insert_sql(table, rows[0])
        values = [[_sql_value(value) for value in row.values()] for row in rows]
        self._statement(lambda conn: conn.executemany(sql, values))

    def _insert_sql(self, table: str, row: dict[str, Any]) -> str:
        """The INSERT of a table's columns as ``row`` names them, made once."""
        key = (table, *row)
        sql = self._inserts.get(key)
        if sql is None:
            columns = ", ".join(_quoted(column) for column in row)
            marks = ", ".join("?" * len(row))
            sql = self._inserts[key] = f"INSERT INTO {_quoted(table)} ({columns}) VALUES ({marks})"
        return sql

    def update(self, table: str, pk: int, values: dict[str, Any]) -> None:
        assignments = ", ".join(f"{_quoted(column)} = ?" for column in values)
        key = self._primary_key(table)
        self.write(f"UPDATE {_quoted(table)} SET {assignments} WHERE {_quoted(key)} = ?",
                   [*(_sql_value(value) for value in values.values()), pk])

    def write(self, sql: str, params: list[Any] | tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """One statement: part of the event under way, else an event of its own (a single
        statement is atomic: inside an event it needs no savepoint of its own)."""
        return self._statement(lambda conn: conn.execute(sql, params))

    def _statement(self, run: Callable[[sqlite3.Connection], sqlite3.Cursor]) -> sqlite3.Cursor:
        """``run`` on the connection, in the event under way (which rolls it back with the
        rest if it fails), else in an event of its own."""
        with self.lock:
            if self._depth:
                return run(self.db.conn)
        with self.event() as db:
            return run(db.conn)

    @contextlib.contextmanager
    def durable_together(self) -> Iterator[None]:
        """The events inside commit one by one, as ever, and wait for the disk once, at
        the end (under ``full`` durability): the scheduler's round closings and team
        timers of one tick share a sync instead of waiting for one each."""
        self._nesting.deferred = True
        try:
            yield
        finally:
            self._nesting.deferred = False
        self.wait_durable()

    def wait_durable(self) -> None:
        """Return once every commit made so far is on the disk (under ``full``
        durability): an answer that reports what is stored (a duplicate, a refusal) waits
        for it as an acknowledgement does."""
        if self.wal_sync is not None:
            self.wal_sync.wait(self.wal_sync.committed)

    def _primary_key(self, table: str) -> str:
        if table not in self._keys:
            self._keys[table] = self.db[table].pks[0]
        return self._keys[table]

    def reject(self, participant_id: int | None, event: str, msg_id: str | None, reason: str,
               detail: str, payload: Any, at: float) -> None:
        """Log a refused message; it changes nothing else.

        The first ``REJECTIONS_KEPT`` refusals of a participant for one reason are kept
        with their payload cut to ``REJECTION_PAYLOAD_BYTES``; beyond that only a count
        grows, so a stuck or hostile tab cannot fill the disk."""
        if participant_id is not None and self._rejections_kept(participant_id, reason):
            self.rejection_counts.add(participant_id, reason, at)
            self.wait_durable()  # the refusal may name a row still on its way to the disk
            return
        self.insert("rejections", {"participant_id": participant_id, "event": event,
                                   "msg_id": msg_id, "reason": reason,
                                   "detail": str(detail)[:REJECTION_PAYLOAD_BYTES],
                                   "payload": _capped_json(payload), "at": at})

    def _rejections_kept(self, participant_id: int, reason: str) -> bool:
        """Whether the participant's refusals for this reason already fill their rows
        (remembered once true: rows are only removed with the participant's data)."""
        if (participant_id, reason) in self.rejection_counts.full:
            return True
        row = self.one("SELECT count(*) AS n FROM (SELECT 1 FROM rejections WHERE "
                       "participant_id = ? AND reason = ? LIMIT ?)",
                       (participant_id, reason, REJECTIONS_KEPT))
        if row and row["n"] >= REJECTIONS_KEPT:
            self.rejection_counts.full.add((participant_id, reason))
            return True
        return False

    def checkpoint(self) -> bool:
        """Copy the write-ahead log into the database and empty it: after a withdrawal,
        neither file holds a deleted row any longer (``secure_delete`` zeroes the pages).

        A reader of another connection (an export, another process) can hold the log; the
        checkpoint then waits at most ``CHECKPOINT_WAIT_SECONDS`` rather than stall this
        process, and is tried again after a later commit (at most that often)."""
        with self.lock:
            if time.monotonic() < self.checkpoint_retry_at:
                return False
            conn = self.db.conn
            conn.execute(f"PRAGMA busy_timeout = {int(CHECKPOINT_WAIT_SECONDS * 1000)}")
            try:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_SECONDS * 1000}")
            self.checkpoint_due = bool(busy)
            self.checkpoint_retry_at = time.monotonic() + CHECKPOINT_WAIT_SECONDS if busy \
                else 0.0
            return not busy

    def _checkpoint_quietly(self) -> None:
        """``checkpoint``, when the disk lets it: on a full disk it is due again later."""
        try:
            self.checkpoint()
        except sqlite3.Error as error:
            if not is_storage_fault(error):
                raise
            self.checkpoint_due = True
            self.checkpoint_retry_at = time.monotonic() + CHECKPOINT_WAIT_SECONDS

    def delete_participants(self, participant_ids: list[int]) -> None:
        """Delete participants and every row of theirs (unconsented ones that expired)."""
        if not participant_ids:
            return
        marks = ", ".join("?" * len(participant_ids))
        with self.event() as db:
            for table in [*tables_with_participant_rows(db.conn), "participants"]:
                column = "id" if table == "participants" else "participant_id"
                db.execute(f"DELETE FROM {_quoted(table)} WHERE {column} IN ({marks})",
                           participant_ids)

    def erase_participant(self, participant_id: int, keep: dict[str, Any]) -> None:
        """Delete every row of a participant; the participants row keeps only ``keep``
        (its code, protocol and terminal step stay as they are)."""
        cleared = {"condition_order": None, "external_ids": None, "consent_at": None,
                   "finished_at": None, "withdrawn_at": None, "consent": None,
                   "data_consent": None, "robots_identical": None, "recruitment_id": None,
                   "themes": None, "themes_rule": None, "withdrawn_from": None}
        with self.event() as db:
            erase_rows(db.conn, participant_id)
            db["participants"].update(participant_id, {**cleared, **keep})
        self.rejection_counts.forget(participant_id)
        self.checkpoint_due = True
        if not self.db.conn.in_transaction:
            self._checkpoint_quietly()


class RejectionCounts:
    """Refusals beyond the kept rows, counted per participant and reason in memory and
    added to ``rejection_counts`` at most once per ``FLUSH_SECONDS``: a flood of refused
    messages costs no write per message (a crash loses at most that second's counts)."""

    FLUSH_SECONDS = 1.0

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.full: set[tuple[int, str]] = set()
        self.pending: dict[tuple[int, str], tuple[int, float]] = {}
        self.flushed = time.monotonic()
        self.lock = threading.Lock()

    def add(self, participant_id: int, reason: str, at: float) -> None:
        with self.lock:
            count, _ = self.pending.get((participant_id, reason), (0, at))
            self.pending[(participant_id, reason)] = (count + 1, at)
        if time.monotonic() - self.flushed >= self.FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Add the pending counts to the database (one transaction)."""
        with self.lock:
            pending, self.pending = self.pending, {}
            self.flushed = time.monotonic()
        if not pending:
            return
        try:
            with self.storage.event() as db:
                db.conn.executemany(
                    "INSERT INTO rejection_counts (participant_id, reason, count, last_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (participant_id, reason) DO UPDATE SET "
                    "count = count + excluded.count, last_at = excluded.last_at",
                    [(pid, reason, count, at) for (pid, reason), (count, at) in pending.items()])
        except StorageUnavailable:  # kept for the next flush, once the disk takes writes
            self._restore(pending)

    def _restore(self, pending: dict[tuple[int, str], tuple[int, float]]) -> None:
        with self.lock:
            for key, (count, at) in pending.items():
                newer, last = self.pending.get(key, (0, at))
                self.pending[key] = (count + newer, max(at, last))

    def forget(self, participant_id: int) -> None:
        """A withdrawn participant's refusals are not counted any longer."""
        with self.lock:
            self.pending = {key: value for key, value in self.pending.items()
                            if key[0] != participant_id}
            self.full = {key for key in self.full if key[0] != participant_id}
