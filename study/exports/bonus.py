"""Bonuses: the protocol's ``[bonus]`` applied to what participants did and met, as the bulk
bonus file a recruitment platform takes (Prolific: one ``participant id,amount`` line
each), with every export recorded so that nobody is paid twice.

A participant earns a line per reason: ``performance`` (the cookies formula, once they
finished), ``lobby-wait`` (the minutes they waited in a [team]'s lobby), ``unmatched`` (no
team or teammate could be formed for them) and ``teammate-dropped`` (an agent took over a
teammate's seat). A person is never paid more than ``cap`` in all. Each export records its
lines (``bonus_exports``, ``bonus_lines``); the next one writes only lines not exported
before, unless asked ``again``.

The rule is read from the protocol the data were collected under (the database's newest
``server_runs`` snapshot) unless another protocol file is given, so a bonus never depends
on a file edited after the study. The files are written with a CSV writer: an id holding a
comma, a quote or a line break is quoted and one starting like a formula is escaped, the
rule ``study.exports.tables`` applies to every CSV it writes.
"""

from __future__ import annotations

import csv
import io
import math
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from study.allocation.model import InvalidInput
from study.exports.tables import (
    RUNS_TABLE,
    connect_read_only,
    csv_bytes,
    database_tables,
    escape_formula,
)
from study.protocol import schema
from study.protocol.loader import load_protocol, parse_protocol

# The reasons a line is paid for, in the order a person's cap is spent on them: what was
# owed for the time first, performance last.
REASONS = ("lobby-wait", "unmatched", "teammate-dropped", "performance")
EXPORTS_TABLE = "bonus_exports"
LINES_TABLE = "bonus_lines"
PLATFORM_FILE = "bonus.csv"
DETAILS_FILE = "bonus-details.csv"
COLUMNS = ["code", "recruitment_id", "reason", "cookies", "team_cookies", "minutes", "amount"]

# Cookies of the collaborative sessions, per finished participant.
PERFORMANCE_SQL = """
SELECT p.id AS pid, p.code, p.recruitment_id,
       coalesce(sum(r.participant_cookies), 0) AS cookies,
       coalesce(sum(r.participant_cookies + r.teammate_cookies), 0) AS team_cookies
FROM participants p
LEFT JOIN sessions s ON s.participant_id = p.id AND s.kind = 'collaborative'
LEFT JOIN rounds r ON r.session_id = s.id AND r.closed_at IS NOT NULL
WHERE p.step = 'done'
GROUP BY p.id ORDER BY p.id
"""
# Every wait in the lobby that ended, however (a team, the timer, leaving).
LOBBY_SQL = """
SELECT p.id AS pid, p.code, p.recruitment_id, (l.left_at - l.entered_at) / 60.0 AS minutes
FROM lobby l JOIN participants p ON p.id = l.participant_id
WHERE l.left_at IS NOT NULL ORDER BY p.id
"""
UNMATCHED_SQL = """
SELECT id AS pid, code, recruitment_id FROM participants WHERE step = 'unmatched' ORDER BY id
"""
# People still in their seat when an agent took over a teammate's.
TEAMMATE_DROPPED_SQL = """
SELECT p.id AS pid, p.code, p.recruitment_id FROM participants p
WHERE p.step != 'withdrawn' AND EXISTS (
  SELECT 1 FROM seats mine JOIN seats other ON other.team_id = mine.team_id
   AND other.id != mine.id AND other.kind = 'person' AND other.dropped_at IS NOT NULL
  WHERE mine.participant_id = p.id AND mine.kind = 'person'
   AND (mine.dropped_at IS NULL OR mine.dropped_at > other.dropped_at))
ORDER BY p.id
"""
# table -> its columns, for the two tables an export is recorded in (documented in
# ``study.exports.tables.CODEBOOK`` and docs/database.md).
RECORD_SCHEMA = {
    EXPORTS_TABLE: {"id": int, "at": float, "again": int, "source": str, "rule": str,
                    "currency": str, "lines": int, "people": int, "total": float},
    LINES_TABLE: {"id": int, "export_id": int, "code": str, "reason": str, "amount": float},
}


@dataclass(frozen=True)
class Bonuses:
    """The lines of one export: per participant and reason, the figures and the amount."""

    rule: schema.Bonus
    source: str
    table: pd.DataFrame  # COLUMNS, one row per participant and reason
    earlier: int  # lines left out because an earlier export wrote them

    def payable(self) -> pd.DataFrame:
        """Per recruitment id, the sum of its lines, where positive: the platform's lines."""
        lines = self.table[self.table["recruitment_id"].notna()]
        sums = lines.groupby("recruitment_id", sort=False)["amount"].sum().round(2)
        return sums[sums > 0].reset_index()

    def platform_csv(self) -> bytes:
        """The bulk bonus file: ``id,amount`` per participant, amounts with two decimals,
        no header; a CSV writer quotes what needs it and formulas are escaped."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        for row in self.payable().itertuples(index=False):
            writer.writerow([escape_formula(row.recruitment_id), f"{row.amount:.2f}"])
        return buffer.getvalue().encode()

    def details_csv(self) -> bytes:
        """Every line with the figures its amount came from and its reason."""
        return csv_bytes(self.table)


def cents(value: float) -> int:
    """An amount in whole cents, rounded down (never more than the rule gives)."""
    return math.floor(round(value * 100, 6))


def amount(rule: schema.Bonus, cookies: int, team_cookies: int) -> float:
    """The performance formula, capped and rounded down to the cent."""
    value = rule.per_cookie * cookies + rule.per_team_cookie * team_cookies
    if rule.cap is not None:
        value = min(value, rule.cap)
    return cents(value) / 100


def lobby_amount(rule: schema.Bonus, minutes: float) -> float:
    """The pay for a wait in the lobby, at most ``lobby_cap``, rounded down to the cent."""
    value = rule.per_lobby_minute * max(minutes, 0.0)
    if rule.lobby_cap is not None:
        value = min(value, rule.lobby_cap)
    return cents(value) / 100


def bonuses(db_path: Path, protocol_path: Path | None = None, again: bool = False) -> Bonuses:
    """The lines an export would write now (the database is only read)."""
    connection = connect_read_only(Path(db_path))
    try:
        return _bonuses(connection, protocol_path, again)
    finally:
        connection.close()


def export_bonuses(db_path: Path, out: Path, protocol_path: Path | None = None,
                   again: bool = False, clock: Callable[[], float] = time.time,
                   ) -> tuple[Bonuses, list[Path]]:
    """Write the lines not exported before (all of them with ``again``) under ``out`` and
    record them, in one write transaction: two exports at once cannot both write a line.
    Files already in ``out`` are never overwritten (they may not be paid yet); nothing is
    written or recorded when there is nothing new."""
    from study.storage.database import Storage

    if not Path(db_path).is_file():
        raise InvalidInput("DB", str(db_path), "no such database")
    targets = [out / PLATFORM_FILE, out / DETAILS_FILE]
    for target in targets:
        if target.exists():
            raise InvalidInput("--out", str(out), f"already holds {target.name}, maybe of an "
                               "export not paid yet; give another directory")
    written: list[Path] = []
    storage = Storage(db_path)
    try:
        with storage.event() as db:
            _create_record_tables(db.conn)
            result = _bonuses(db.conn, protocol_path, again)
            if not result.table.empty:
                _record(db.conn, result, again, clock())
                _write(result, targets, written)
    except BaseException:  # nothing recorded: no file may say otherwise
        for path in written:
            path.unlink(missing_ok=True)
        raise
    finally:
        storage.close()
    return result, written


def _write(result: Bonuses, targets: list[Path], written: list[Path]) -> None:
    targets[0].parent.mkdir(parents=True, exist_ok=True)
    for target, content in zip(targets, (result.platform_csv(), result.details_csv()),
                               strict=True):
        with target.open("xb") as file:  # never over a file that appeared meanwhile
            written.append(target)
            file.write(content)


def _create_record_tables(connection: sqlite3.Connection) -> None:
    types = {int: "INTEGER", float: "REAL", str: "TEXT"}
    for table, columns in RECORD_SCHEMA.items():
        body = ", ".join(f"{name} {types[kind]}" + (" PRIMARY KEY" if name == "id" else "")
                         for name, kind in columns.items())
        connection.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body})")
    connection.execute(f"CREATE INDEX IF NOT EXISTS {LINES_TABLE}_by_code ON "
                       f"{LINES_TABLE}(code, reason)")


def _record(connection: sqlite3.Connection, result: Bonuses, again: bool, at: float) -> None:
    payable = result.payable()
    cursor = connection.execute(
        f"INSERT INTO {EXPORTS_TABLE} (at, again, source, rule, currency, lines, people, "
        "total) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (at, int(again), result.source, result.rule.model_dump_json(), result.rule.currency,
         len(result.table), len(payable), round(float(payable["amount"].sum()), 2)))
    connection.executemany(
        f"INSERT INTO {LINES_TABLE} (export_id, code, reason, amount) VALUES (?, ?, ?, ?)",
        [(cursor.lastrowid, row.code, row.reason, float(row.amount))
         for row in result.table.itertuples(index=False)])


# --- the lines ----------------------------------------------------------------------------


def _bonuses(connection: sqlite3.Connection, protocol_path: Path | None,
             again: bool) -> Bonuses:
    rule, source = _rule(connection, protocol_path)
    tables = set(database_tables(connection))
    exported = {} if again else _exported(connection, tables)
    every = _lines(connection, rule, tables)
    lines = [line for line in every if (line["code"], line["reason"]) not in exported]
    lines.sort(key=lambda line: (line["pid"], REASONS.index(line["reason"])))
    _apply_cap(lines, rule, exported)
    table = pd.DataFrame(lines, columns=["pid", *COLUMNS]).drop(columns="pid")
    for column, kind in (("cookies", "Int64"), ("team_cookies", "Int64"),
                         ("minutes", "Float64"), ("amount", "float64")):
        table[column] = table[column].astype(kind)
    return Bonuses(rule, source, table, earlier=len(every) - len(lines))


def _lines(connection: sqlite3.Connection, rule: schema.Bonus,
           tables: set[str]) -> list[dict[str, Any]]:
    """Every line the rule pays for, exported before or not, amounts before the cap."""
    lines = [{**row, "reason": "performance", "minutes": None,
              "amount": amount(rule, int(row["cookies"]), int(row["team_cookies"]))}
             for row in _rows(connection, PERFORMANCE_SQL)]
    if rule.per_lobby_minute and "lobby" in tables:
        lines += [{**row, "reason": "lobby-wait", "minutes": round(row["minutes"], 2),
                   "amount": lobby_amount(rule, row["minutes"])}
                  for row in _rows(connection, LOBBY_SQL)]
    if rule.unmatched:
        lines += [{**row, "reason": "unmatched", "amount": cents(rule.unmatched) / 100}
                  for row in _rows(connection, UNMATCHED_SQL)]
    if rule.teammate_dropped and "seats" in tables:
        lines += [{**row, "reason": "teammate-dropped",
                   "amount": cents(rule.teammate_dropped) / 100}
                  for row in _rows(connection, TEAMMATE_DROPPED_SQL)]
    return lines


def _apply_cap(lines: list[dict[str, Any]], rule: schema.Bonus,
               exported: dict[tuple[str, str], float]) -> None:
    """Cut each person's lines, in the order of ``REASONS``, so that with what earlier
    exports paid them they reach ``cap`` at most."""
    if rule.cap is None:
        return
    left: dict[str, int] = {}
    for (code, _), paid in exported.items():
        left[code] = left.get(code, cents(rule.cap)) - round(paid * 100)
    for line in lines:
        room = max(left.get(line["code"], cents(rule.cap)), 0)
        paid = min(cents(line["amount"]), room)
        line["amount"] = paid / 100
        left[line["code"]] = room - paid


def _exported(connection: sqlite3.Connection,
              tables: set[str]) -> dict[tuple[str, str], float]:
    """(code, reason) -> amount, of every line an earlier export wrote."""
    if LINES_TABLE not in tables:
        return {}
    rows = connection.execute(f"SELECT code, reason, sum(amount) FROM {LINES_TABLE} "
                              "GROUP BY code, reason").fetchall()
    return {(code, reason): float(total) for code, reason, total in rows}


def _rows(connection: sqlite3.Connection, sql: str) -> list[dict[str, Any]]:
    cursor = connection.execute(sql)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _rule(connection: sqlite3.Connection, protocol_path: Path | None,
          ) -> tuple[schema.Bonus, str]:
    if protocol_path is not None:
        protocol, source = load_protocol(protocol_path), str(protocol_path)
    elif RUNS_TABLE in database_tables(connection):
        row = connection.execute(f"SELECT protocol_text, protocol_sha256 FROM {RUNS_TABLE} "
                                 "ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            raise InvalidInput("DB", "server_runs", "holds no protocol snapshot; give "
                                                    "--protocol")
        protocol = parse_protocol(row[0])
        source = f"the database's protocol snapshot {row[1][:12]}"
    else:
        raise InvalidInput("DB", "server_runs", "the database holds no protocol snapshot; "
                                                "give --protocol")
    if protocol.bonus is None:
        raise InvalidInput("[bonus]", source, "the protocol declares no bonus formula")
    return protocol.bonus, source

