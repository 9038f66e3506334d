"""The lobby: people wait after practice until a team forms, or a timer runs out.

Every decision is taken inside the caller's write transaction, on the rows as they are at
that moment: a team is founded with everyone's state checked and changed together, so
nobody is placed after their own time-out (docs/teams.md).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from study.pool.teamtypes import team_type_codes
from study.protocol.loader import Protocol, TeamDesign
from study.protocol.pool_names import TEAM_TYPES
from study.storage.database import Storage
from study.web.participant.real_teams.agents import fill_with_agents
from study.web.participant.real_teams.founding import Founding, Person
from study.web.participant.rejections import Rejected

# Groups typed at once when forming by traits: a thousand waiting people make half a
# million pairs, typed in blocks this size rather than one by one.
TYPED_BLOCK = 50_000


class Lobby:
    """Who waits, the two timers, and which teams form."""

    def __init__(self, protocol: Protocol, storage: Storage, founding: Founding,
                 advance: Callable[[int, str, float], None], pool: Callable[[], Any]) -> None:
        self.protocol = protocol
        self.design: TeamDesign = protocol.team  # type: ignore[assignment]
        self.storage = storage
        self.founding = founding
        self.advance = advance
        self.pool = pool
        self._ungrouped: tuple[tuple[int, float], ...] | None = None  # waiting, no team

    def enter(self, participant_id: int, now: float) -> None:
        """A person whose practice ended (and who is measured) starts waiting."""
        individual = self.design.individual_seconds
        self.storage.insert("lobby", {
            "participant_id": participant_id, "entered_at": now,
            "individual_deadline": now + individual if individual else None})
        self.advance(participant_id, "lobby", now)

    def waiting(self) -> list[dict[str, Any]]:
        return self.storage.all(
            "SELECT l.*, p.code FROM lobby l JOIN participants p ON p.id = l.participant_id "
            "WHERE l.outcome IS NULL AND p.step = 'lobby' ORDER BY l.entered_at, l.id")

    def shared_deadline(self, waiting: list[dict[str, Any]]) -> float | None:
        """The shared timer runs from the first person now waiting: it restarts with the
        next person once a team has taken the earlier ones (agents never start it)."""
        if not waiting or not self.design.shared_seconds:
            return None
        return waiting[0]["entered_at"] + self.design.shared_seconds

    def next_due(self) -> float | None:
        """The earliest moment a timer runs out."""
        waiting = self.waiting()
        times = [row["individual_deadline"] for row in waiting if row["individual_deadline"]]
        shared = self.shared_deadline(waiting)
        return min([*times, *([shared] if shared else [])], default=None)

    def form(self, now: float) -> set[int]:
        """Found every team the waiting people make, then apply the timers that ran out;
        returns the participants whose page changed."""
        changed: set[int] = set()
        waiting = self.waiting()
        person = functools.cache(self.founding.person)  # measured once per look
        for group in self._groups(waiting, person):
            if self.design.persons < self.design.humans:  # the protocol's own agent seats
                self._with_agents(group, self.design.formation, now, changed)
                continue
            self.founding.found([person(row["participant_id"]) for row in group], None,
                                self.design.formation, now)
            changed |= {row["participant_id"] for row in group}
        waiting = [row for row in waiting if row["participant_id"] not in changed]
        shared = self.shared_deadline(waiting)
        if shared is not None and now >= shared:
            for row in waiting:
                self._time_out(row, waiting, "shared-timeout", now, changed)
        for row in waiting:
            if (row["participant_id"] not in changed and row["individual_deadline"]
                    and now >= row["individual_deadline"]):
                self._time_out(row, [row], "individual-timeout", now, changed)
        return changed

    def leave(self, participant: dict[str, Any], data: dict[str, Any], now: float) -> None:
        """The person leaves the lobby (once ``leave_after_seconds`` have passed): the
        unmatched page with the return link."""
        if data.get("leave") is not True:
            raise Rejected("malformed", "data.leave must be true")
        row = self.storage.one("SELECT * FROM lobby WHERE participant_id = ?",
                               (participant["id"],))
        if row is None or now < row["entered_at"] + self.design.leave_after_seconds:
            raise Rejected("out-of-order", "the waiting room cannot be left yet")
        self._close(row, "left", None, now)
        self.advance(participant["id"], "unmatched", now)

    def page(self, participant_id: int) -> dict[str, Any] | None:
        """What the waiting page shows: how many of the people here can be in one team
        with the person (by traits, only those whose team with them is of a wanted type;
        the others are counted apart), what the wait is for, and when it ends."""
        row = self.storage.one("SELECT * FROM lobby WHERE participant_id = ?",
                               (participant_id,))
        if row is None:
            return None
        waiting = self.waiting()
        shared = self.shared_deadline(waiting)
        individual = row["individual_deadline"]
        ids = [other["participant_id"] for other in waiting]
        fitting = self._fitting(participant_id, ids)
        here = min(1 + fitting, self.design.persons)
        others = len(ids) - 1 - fitting if participant_id in ids else len(ids)
        return {"waiting": here, "needed": self.design.persons,
                "missing": self.design.persons - here,
                "others": others if self.design.formation == "traits" else 0,
                "formation": self.design.formation,
                "entered_at": row["entered_at"], "shared_deadline": shared,
                "individual_deadline": individual,
                "deadline": min((t for t in (shared, individual) if t), default=None),
                "on_timeout": self.design.on_timeout,
                "leave_at": row["entered_at"] + self.design.leave_after_seconds}

    def waiting_ids(self) -> set[int]:
        """Everyone waiting: whose page counts change when someone comes or goes."""
        return {row["participant_id"] for row in self.waiting()}

    def _fitting(self, participant_id: int, ids: list[int]) -> int:
        """How many of the others waiting (``ids``, in arrival order) can be in one team
        with the person: by arrival, all; by traits, those whose pair with the person
        (formation by traits pairs two people) is of a type the design names."""
        if participant_id not in ids:
            return 0
        if self.design.formation == "arrival":
            return len(ids) - 1
        c, p = self._measured(ids)
        k = ids.index(participant_id)
        pairs = np.array([sorted((k, j)) for j in range(len(ids)) if j != k],
                         dtype=int).reshape(-1, 2)
        return int(self._of_wanted_type(c[pairs], p[pairs]).sum())

    def _measured(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """``[m, n]`` capabilities and preferences of these people, in one query."""
        c = np.zeros((len(ids), len(self.protocol.cookies)))
        p = np.zeros_like(c)
        row_of = {participant_id: k for k, participant_id in enumerate(ids)}
        for row in self.storage.all(
                "SELECT participant_id, kind, task_type, value FROM measurements WHERE "
                "kind IN ('capability', 'preference') AND "
                f"participant_id IN ({', '.join('?' * len(ids))})", tuple(ids)):
            target = c if row["kind"] == "capability" else p
            target[row_of[row["participant_id"]], row["task_type"]] = row["value"]
        return c, p

    def _of_wanted_type(self, c: np.ndarray, p: np.ndarray) -> np.ndarray:
        """``[B]``: whether each team (``[B, h, n]``) has a live type the design names."""
        wanted = [TEAM_TYPES.index(name) for name in self.design.team_types]
        return np.isin(team_type_codes(c, p, self.protocol.pool.most_capable_reading),
                       wanted)

    # --- forming ------------------------------------------------------------------------

    def _groups(self, waiting: list[dict[str, Any]],
                person: Callable[[int], Person]) -> list[list[dict[str, Any]]]:
        """Disjoint groups of waiting people that make a team, earliest arrivals first."""
        size = self.design.persons
        if self.design.formation == "arrival":
            return [waiting[i:i + size] for i in range(0, len(waiting) - size + 1, size)]
        # By traits every group of people is typed; the same people found none last time.
        key = tuple((row["id"], row["entered_at"]) for row in waiting)
        if key == self._ungrouped:
            return []
        people = [person(row["participant_id"]) for row in waiting]
        c, p = np.array([x.c for x in people]), np.array([x.p for x in people])
        groups: list[list[dict[str, Any]]] = []
        taken: set[int] = set()
        for combination in self._typed(c, p, size):
            if taken.isdisjoint(combination):
                groups.append([waiting[k] for k in combination])
                taken.update(combination)
        self._ungrouped = None if groups else key
        return groups

    def _typed(self, c: np.ndarray, p: np.ndarray,
               size: int) -> Iterator[tuple[int, ...]]:
        """The combinations of ``size`` people (by index, in order) whose team alone has a
        live type the design names; typed a block at a time, as ``live_type`` would."""
        combinations = itertools.combinations(range(len(c)), size)
        while block := list(itertools.islice(combinations, TYPED_BLOCK)):
            index = np.array(block)
            for combination, wanted in zip(block, self._of_wanted_type(c[index], p[index]),
                                           strict=True):
                if wanted:
                    yield combination

    def _time_out(self, row: dict[str, Any], waiting: list[dict[str, Any]], formed_by: str,
                  now: float, changed: set[int]) -> None:
        """A timer ran out for ``row``: with ``agents`` the people of ``waiting`` still
        unplaced start with agents in the empty seats (by arrival: in groups; by traits:
        each with agents of the right type); with ``unmatched`` the person goes."""
        if row["participant_id"] in changed:
            return
        if self.design.on_timeout == "unmatched":
            self._close(row, "timeout", None, now)
            self.advance(row["participant_id"], "unmatched", now)
            changed.add(row["participant_id"])
            return
        size = 1 if self.design.formation == "traits" else self.design.persons
        free = [r for r in waiting if r["participant_id"] not in changed]
        start = free.index(row)
        group = free[start:start + size] if size > 1 else [row]
        self._with_agents(group, formed_by, now, changed)

    def _with_agents(self, group: list[dict[str, Any]], formed_by: str, now: float,
                     changed: set[int]) -> None:
        people = [self._person(row) for row in group]
        fill = fill_with_agents(self.pool(), np.array([person.c for person in people]),
                                np.array([person.p for person in people]),
                                self.design.team_types if self.design.formation == "traits"
                                else (), self.protocol.pool.most_capable_reading)
        if fill is None:  # no pool team makes the type with them: nobody can be placed
            for row in group:
                self._close(row, "timeout", None, now)
                self.advance(row["participant_id"], "unmatched", now)
        else:
            self.founding.found(people, fill, formed_by, now)
        changed |= {row["participant_id"] for row in group}

    def _person(self, row: dict[str, Any]) -> Person:
        return self.founding.person(row["participant_id"])

    def _close(self, row: dict[str, Any], outcome: str, team_id: int | None,
               now: float) -> None:
        self.storage.update("lobby", row["id"], {"outcome": outcome, "left_at": now,
                                                 "team_id": team_id})
