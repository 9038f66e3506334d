"""What the server pushes to pages: collected while a transaction writes, sent once it is
over, so no page hears of a change before it is committed."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from study.storage.database import Storage
from study.web.participant.real_teams import RealTeams

Push = tuple[str, str, dict[str, Any]]  # a participant's code, the event, its payload
# Sends the pushes of one flush: all at once, so where their pages are is asked once.
Notify = Callable[[list[Push]], None]


class Outbox:
    """The pushes of one journey: events for a participant's page, by code."""

    def __init__(self, storage: Storage, teams: RealTeams, state: Callable[[str], dict[str, Any]],
                 notify: Notify) -> None:
        self.storage = storage
        self.teams = teams
        self.state = state
        self.notify = notify
        # Filled by every thread that writes, drained by whichever flushes: a deque's append
        # and popleft are atomic, so no push is lost between two threads.
        self.pushes: deque[Push] = deque()

    def queue(self, code: str, event: str, payload: dict[str, Any]) -> None:
        """Keep one push until the next ``flush``."""
        self.pushes.append((code, event, payload))

    def queue_states(self, participant_ids: set[int]) -> None:
        """Keep the page state of each of these participants still on record."""
        for code in self.teams.codes(participant_ids):
            self.queue(code, "state", self.state(code))

    def push_states(self, participant_ids: set[int]) -> None:
        """Push the page state of each of these participants (after their team changed)."""
        self.queue_states(participant_ids)
        self.flush()

    def announce(self, code: str) -> None:
        """Push the participant's page state (after a change made outside their page)."""
        if self.storage.participant(code) is None:
            return
        self.queue(code, "state", self.state(code))
        self.flush()

    def flush(self) -> None:
        """Send the pushes collected while writing, once the transaction is over."""
        pushes = []
        while True:
            try:
                pushes.append(self.pushes.popleft())
            except IndexError:
                break
        if pushes:
            self.notify(pushes)
