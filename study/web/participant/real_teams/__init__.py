"""Real teams (docs/teams.md): the lobby, the team's rounds on one clock, dropped seats.

``RealTeams`` is what the journey holds: for a protocol without ``[team]`` every method is
a no-op, so the journey calls it unconditionally.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from study.protocol.loader import Protocol
from study.storage.database import Storage
from study.web.participant.real_teams.founding import Founding
from study.web.participant.real_teams.lobby import Lobby
from study.web.participant.real_teams.play import TeamPlay
from study.web.serving.shares import EVERYONE, Share

# While people wait or play, the scheduler looks at least this often at who is away and
# which timers ran out.
WATCH_SECONDS = 1.0


class RealTeams:
    """The lobby and the playing teams of one protocol."""

    def __init__(self, protocol: Protocol, storage: Storage, teammates: Any,
                 advance: Callable[[int, str, float], None],
                 session_of: Callable[[int, int], dict[str, Any]]) -> None:
        self.storage = storage
        self.lobby: Lobby | None = None
        self.play: TeamPlay | None = None
        if protocol.team is None:
            return

        def fea_bounds() -> Any:
            return teammates.fea_bounds

        founding = Founding(protocol, storage, fea_bounds, advance)
        self.lobby = Lobby(protocol, storage, founding, advance, lambda: teammates.pool)
        self.play = TeamPlay(protocol, storage, advance, fea_bounds, session_of)

    @property
    def enabled(self) -> bool:
        """Whether the protocol forms real teams (it has ``[team]``)."""
        return self.lobby is not None

    def enter_lobby(self, participant_id: int, now: float) -> set[int]:
        """A measured person starts waiting; the teams that can form, form. Everyone
        waiting is told: the count of who is here changed."""
        assert self.lobby is not None
        self.lobby.enter(participant_id, now)
        return self.lobby.form(now) | {participant_id} | self.lobby.waiting_ids()

    def leave_lobby(self, participant: dict[str, Any], data: dict[str, Any],
                    now: float) -> set[int]:
        """The person leaves the waiting room; returns the others waiting (to be told)."""
        assert self.lobby is not None
        self.lobby.leave(participant, data, now)
        return self.lobby.waiting_ids()

    def tick(self, now: float, reason: str = "deadline", share: Share = EVERYONE) -> set[int]:
        """Timers, presence, round starts and ends, in transactions of their own, a few
        teams each (``TeamPlay.tick``); ``reason`` is the rounds' close reason
        (``recovery`` at a server's start). The lobby's timers are the lease holder's."""
        if self.lobby is None or self.play is None:
            return set()
        lobby = self.lobby

        def form_teams() -> set[int]:
            placed = lobby.form(now)
            if placed:  # the people still waiting count fewer people here
                placed |= lobby.waiting_ids()
            return placed
        return self.play.tick(now, reason, form_teams if share.lease else set, share)

    def next_due(self, now: float, share: Share = EVERYONE) -> float | None:
        """When the teams of ``share`` next need the clock: a round start, and for the lease
        holder a timer or the watch."""
        if self.lobby is None or self.play is None:
            return None
        if not share.lease:
            return self.play.next_due(share)
        times = [t for t in (self.lobby.next_due(), self.play.next_due(share)) if t is not None]
        if self.play.active() or self.lobby.waiting():
            times.append(now + WATCH_SECONDS)
        return min(times, default=None)

    def drop(self, participant_id: int, reason: str, now: float) -> set[int]:
        """An agent takes the person's seat from the next round (no-op outside a team);
        a person who leaves the waiting room changes what the others there read."""
        if self.play is None or self.lobby is None:
            return set()
        waiting = self.lobby.waiting_ids()
        return self.play.drop(participant_id, reason, now) | (
            waiting if participant_id in waiting else set())

    def team_page(self, participant_id: int) -> str:
        """The team page the person reads: the version that says who is in their team."""
        return "team" if self.play is None else self.play.team_page(participant_id)

    def page_state(self, participant_id: int, step: str) -> dict[str, Any]:
        """``state``'s lobby page and the person's team once it formed (docs/teams.md);
        nothing without ``[team]``."""
        if self.lobby is None or self.play is None:
            return {}
        return {"lobby": self.lobby.page(participant_id) if step == "lobby" else None,
                "team": self.play.member(participant_id)}

    def round_state(self, session: dict[str, Any], running: dict[str, Any] | None,
                    now: float) -> dict[str, Any]:
        """``state.round``'s team keys for a team's session (``TeamPlay.round_state``)."""
        return {} if self.play is None else self.play.round_state(session, running, now)

    def station_push(self, row: dict[str, Any], cookies: int,
                     placed: int) -> tuple[list[str], dict[str, Any]]:
        """Whom to tell of a member's changed station, and what (``TeamPlay.station_push``)."""
        return ([], {}) if self.play is None else self.play.station_push(row, cookies, placed)

    def codes(self, participant_ids: set[int]) -> list[str]:
        """The codes of participants still on record (pushes go by code)."""
        if not participant_ids:
            return []
        marks = ", ".join("?" * len(participant_ids))
        return [row["code"] for row in self.storage.all(
            f"SELECT code FROM participants WHERE id IN ({marks})", tuple(participant_ids))]
