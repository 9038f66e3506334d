"""Round probes: one-tap questions asked between collaborative rounds (``[[probes]]``).

A probe is due when a round it follows closes: one row per person, round and probe, open
until the round's close plus the probe's seconds. The first answer is kept; an answer
after the deadline is refused and the probe counts as missed. Nothing waits on a probe on
the server: the page holds its start button until the answer or the deadline, and a real
team's clock runs on as before.
"""

from __future__ import annotations

from typing import Any

from study.protocol.loader import Probe, Protocol
from study.storage.database import Storage
from study.web.participant.inputs import whole
from study.web.participant.rejections import Rejected


class Probes:
    """The probes of one journey: opened at a round's close, answered by the ``probe``
    message, marked missed once overdue, and the open ones carried in the page's state."""

    def __init__(self, protocol: Protocol, storage: Storage) -> None:
        self.protocol = protocol
        self.storage = storage
        self.by_id = {probe.id: probe for probe in protocol.probes}

    def open_after(self, row: dict[str, Any], now: float) -> None:
        """Open every probe due after this closed round (``row`` with its
        ``session_number``), for a person still at its collaborative session."""
        due = [probe for probe in self.protocol.probes if probe.due_after(row["number"])]
        if not due or row["session_number"] == 0:
            return
        step = self.storage.one("SELECT step FROM participants WHERE id = ?",
                                (row["participant_id"],))
        if step is None or step["step"] != f"session-{row['session_number']}":
            return
        self.storage.insert_all("probes", [{
            "participant_id": row["participant_id"], "session_id": row["session_id"],
            "round_id": row["id"], "session_number": row["session_number"],
            "round_number": row["number"], "probe": probe.id, "deadline": now + probe.seconds,
            "missed": 0} for probe in due])

    def answer(self, participant: dict[str, Any], payload: dict[str, Any], now: float) -> None:
        """The ``probe`` message: ``value`` a point of the probe's scale answers it (the
        first answer only), ``value`` null records that the page showed it."""
        round_id = whole(payload.get("round_id"), "round_id")
        probe_id, value = payload.get("probe"), payload.get("value")
        probe = self.by_id.get(probe_id) if isinstance(probe_id, str) else None
        if probe is None:
            raise Rejected("malformed", "probe must name one of the protocol's probes")
        row = self.storage.one(
            "SELECT * FROM probes WHERE participant_id = ? AND round_id = ? AND probe = ?",
            (participant["id"], round_id, probe.id))
        if row is None:
            raise Rejected("out-of-order", f"no probe {probe.id} after round {round_id}")
        if row["answered_at"] is not None:
            raise Rejected("probe-answered", f"probe {probe.id} was answered already")
        if row["missed"] or now > row["deadline"]:
            raise Rejected("probe-missed", f"probe {probe.id} closed at {row['deadline']:.3f}")
        shown = row["shown_at"] if row["shown_at"] is not None else now
        if value is None:
            self.storage.update("probes", row["id"], {"shown_at": shown})
            return
        if (not isinstance(value, int) or isinstance(value, bool)
                or not 1 <= value <= probe.scale.points):
            raise Rejected("invalid-answer", f"value must be 1..{probe.scale.points}")
        self.storage.update("probes", row["id"],
                            {"shown_at": shown, "answered_at": now, "value": value})

    def mark_missed(self, now: float, participant_id: int | None = None) -> int:
        """Mark the probes unanswered by their deadline missed (a participant's, or
        everyone's for the clock); returns how many. A read finds none in the usual case,
        so only an overdue probe costs a write."""
        mine = "" if participant_id is None else " AND participant_id = ?"
        params = (now,) if participant_id is None else (now, participant_id)
        overdue = self.storage.one(
            "SELECT count(*) AS n FROM probes WHERE answered_at IS NULL AND missed = 0 AND "
            f"deadline <= ?{mine}", params)["n"]  # type: ignore[index]
        if overdue:
            self.storage.write("UPDATE probes SET missed = 1 WHERE answered_at IS NULL AND "
                               f"missed = 0 AND deadline <= ?{mine}", params)
        return overdue

    def open_for(self, participant_id: int, now: float) -> list[dict[str, Any]]:
        """The participant's open probes as the page shows them (``state.probes``); those
        past their deadline are marked missed first, so a refresh never shows them again."""
        if not self.by_id:
            return []
        rows = self.storage.all(
            "SELECT * FROM probes WHERE participant_id = ? AND answered_at IS NULL AND "
            "missed = 0 ORDER BY round_id, id", (participant_id,))
        if any(row["deadline"] <= now for row in rows):
            self.mark_missed(now, participant_id)
        return [self._shown(row, self.by_id[row["probe"]]) for row in rows
                if row["deadline"] > now and row["probe"] in self.by_id]

    @staticmethod
    def _shown(row: dict[str, Any], probe: Probe) -> dict[str, Any]:
        return {"id": probe.id, "round_id": row["round_id"], "session": row["session_number"],
                "round": row["round_number"], "text": probe.text,
                "points": probe.scale.points, "anchors": list(probe.scale.anchors),
                "deadline": row["deadline"]}
