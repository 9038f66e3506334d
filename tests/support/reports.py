"""How a participant's cookie in progress was reported: what a test of the page or of a bot
that does what the page does reads back from ``progress``."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from study.web.participant.progress import PLAYED_REPORT_SECONDS

CLOCK_MARGIN = 0.1  # seconds: the page's clock against the server's, and the trip between
# Two reports an interval apart may reach the server closer: the first one delayed on a
# busy machine. Without the interval, a squares round's reports come 0.37 s apart.
JITTER_ALLOWED = 0.5  # of an interval

# A participant's reports in order, with their round's deadline and session; ``?`` is the
# participant's id.
REPORTS_SQL = ("SELECT g.round_id, g.at, r.deadline, s.number AS session FROM progress g "
               "JOIN rounds r ON r.id = g.round_id JOIN sessions s ON s.id = r.session_id "
               "WHERE g.participant_id = ? ORDER BY g.id")


def played_report_gaps(reports: Iterable[dict[str, Any]]) -> list[float]:
    """Seconds between consecutive reports of a played round (``REPORTS_SQL``'s rows),
    leaving out those in a round's last interval, where every element goes at once."""
    return [later["at"] - earlier["at"] for earlier, later in itertools.pairwise(reports)
            if later["round_id"] == earlier["round_id"] and later["session"] > 0
            and later["deadline"] - later["at"] > PLAYED_REPORT_SECONDS + CLOCK_MARGIN]


def held_back(gaps: list[float]) -> bool:
    """Whether no two reports of a played round reached the server much closer than an
    interval apart (``JITTER_ALLOWED``)."""
    return all(gap > (1 - JITTER_ALLOWED) * PLAYED_REPORT_SECONDS for gap in gaps)
