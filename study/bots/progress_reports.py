"""When a page reports its cookie in progress, for bots that do what the page does
(``static/js/rounds.js``): every element at once where ``round.progress_seconds`` is 0
(practice, which measures the person); else at most once an interval, the latest cookie
going when the interval ends, and every element at once in the round's last interval, so
no report falls after the deadline."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class ProgressReports:
    """One round's reports: which go now, which wait, and until when."""

    every: float  # round.progress_seconds
    deadline: float  # server time
    sent_at: float = -math.inf
    held: Any = None  # the cookie waiting, if any (a cookie is never None)

    @classmethod
    def of(cls, round_state: dict[str, Any]) -> ProgressReports:
        return cls(float(round_state.get("progress_seconds") or 0.0),
                   float(round_state["deadline"]))

    def offer(self, now: float, content: Any) -> bool:
        """An element placed at ``now``: whether its report goes now (else it waits)."""
        if now - self.sent_at >= self.every or self.deadline - now <= self.every:
            self.held = None
            self.sent_at = now
            return True
        self.held = content
        return False

    def due(self) -> float | None:
        """When the waiting report goes, if one waits."""
        return None if self.held is None else self.sent_at + self.every

    def take(self) -> Any:
        """The waiting report, sent as its interval ends."""
        content, self.held = self.held, None
        self.sent_at += self.every
        return content

    def drop(self) -> None:
        """A finished cookie: its ``cookie`` message says it all."""
        self.held = None
