"""Performance bonuses: the protocol's ``[bonus]`` formula applied to the participants who
finished, as the bulk bonus file a recruitment platform takes (Prolific: one
``participant id,amount`` line each).

The formula is read from the protocol the data were collected under (the database's newest
``server_runs`` snapshot) unless another protocol file is given, so a bonus never depends
on a file edited after the study.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from study import protocol_schema as schema
from study.export import RUNS_TABLE, connect_read_only, database_tables
from study.model import InvalidInput
from study.protocol import load_protocol, parse_protocol

# Cookies of the collaborative sessions, per finished participant.
COOKIES_SQL = """
SELECT p.code, p.recruitment_id,
       coalesce(sum(r.participant_cookies), 0) AS cookies,
       coalesce(sum(r.participant_cookies + r.teammate_cookies), 0) AS team_cookies
FROM participants p
LEFT JOIN sessions s ON s.participant_id = p.id AND s.kind = 'collaborative'
LEFT JOIN rounds r ON r.session_id = s.id AND r.closed_at IS NOT NULL
WHERE p.step = 'done'
GROUP BY p.id ORDER BY p.id
"""


@dataclass(frozen=True)
class Bonuses:
    """Per finished participant: cookies, team cookies and the amount, with the rule."""

    rule: schema.Bonus
    source: str
    table: pd.DataFrame  # code, recruitment_id, cookies, team_cookies, amount

    def platform_csv(self) -> bytes:
        """The bulk bonus file: ``id,amount`` per participant with a recruitment id and a
        positive amount, amounts with two decimals, no header."""
        payable = self.table[self.table["recruitment_id"].notna() & (self.table["amount"] > 0)]
        lines = [f"{row.recruitment_id},{row.amount:.2f}" for row in payable.itertuples()]
        return "".join(f"{line}\r\n" for line in lines).encode()

    def details_csv(self) -> bytes:
        """Every finished participant with the figures the amount came from."""
        from study.export import csv_bytes

        return csv_bytes(self.table)


def amount(rule: schema.Bonus, cookies: int, team_cookies: int) -> float:
    """The formula, capped and rounded down to the cent (never more than the cap)."""
    value = rule.per_cookie * cookies + rule.per_team_cookie * team_cookies
    if rule.cap is not None:
        value = min(value, rule.cap)
    return math.floor(round(value * 100, 6)) / 100


def bonuses(db_path: Path, protocol_path: Path | None = None) -> Bonuses:
    """The bonuses of a study database under its snapshot's (or ``protocol_path``'s) rule."""
    connection = connect_read_only(Path(db_path))
    try:
        rule, source = _rule(connection, protocol_path)
        table = pd.read_sql_query(COOKIES_SQL, connection)
    finally:
        connection.close()
    table["amount"] = [amount(rule, int(row.cookies), int(row.team_cookies))
                       for row in table.itertuples()]
    return Bonuses(rule, source, table)


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
