"""Counterbalancing the order of conditions across participants.

A plain alternation by enrolment count drifts: people who decline, withdraw or are aborted
still take their turn, and anonymous page loads can steer who gets what. So an order is
assigned only at consent (in the consent's write transaction, so two processes count each
other), and the balance counts only participants who consented and may still contribute
data (in progress or finished), leaving out those who never will.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from study.protocol.orders import counterbalanced

# Participants in these steps will never contribute data to their order (a person dropped
# from a real team's seat for being away or late plays no more rounds).
LOST_STEPS = ("declined", "withdrawn", "unmatched", "dropped")
# Console statuses (see study.web.console.views) that take a participant out of the study.
LOST_STATUSES = ("aborted",)


def orders(condition_ids: list[str], mode: str) -> list[list[str]]:
    """The orders in rotation (``study.protocol.orders``): every order of two or three conditions,
    a balanced Latin square of four, or just the listed one."""
    return counterbalanced(condition_ids, mode)


def order_counts(storage: Any, candidates: list[list[str]]) -> list[int]:
    """How many participants who may still contribute data hold each candidate order.
    Counted by SQLite, an order at a time: every consent asks, inside its write
    transaction, over everyone who ever consented."""
    rows = storage.all(
        "SELECT condition_order, count(*) AS n FROM participants p WHERE condition_order "
        f"IS NOT NULL AND consent = 'given' AND step NOT IN ({', '.join('?' * len(LOST_STEPS))}) "
        + _not_aborted_clause(storage) + " GROUP BY condition_order", LOST_STEPS)
    held: Counter[tuple[str, ...]] = Counter()
    for row in rows:  # one JSON text an order, however it was spelled
        held[tuple(json.loads(row["condition_order"]))] += row["n"]
    return [held[tuple(candidate)] for candidate in candidates]


def _not_aborted_clause(storage: Any) -> str:
    """Leave out participants the experimenter aborted (the console's table, if present)."""
    if "console_status" not in storage.db.table_names():
        return ""
    statuses = ", ".join(f"'{status}'" for status in LOST_STATUSES)
    return ("AND NOT EXISTS (SELECT 1 FROM console_status s WHERE s.participant_id = p.id "
            f"AND s.status IN ({statuses}))")


def balanced_order(storage: Any, protocol: Any) -> list[str]:
    """The order held by the fewest participants who may still contribute (ties: listed
    order first), so abandoned and declined participants free their slot."""
    candidates = orders([c.id for c in protocol.conditions], protocol.condition_order)
    counts = order_counts(storage, candidates)
    return candidates[counts.index(min(counts))]
