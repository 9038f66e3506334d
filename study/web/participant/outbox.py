"""What the server pushes to pages: collected while a transaction writes, sent once it is
over, so no page hears of a change before it is committed."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from study.storage.database import Storage
from study.web.participant.real_teams import RealTeams

Push = tuple[str, str, dict[str, Any]]  # a participant's code, the event, its payload


class Notify(Protocol):
    """Sends the pushes of one flush, all at once, so where their pages are is asked once."""

    def __call__(self, pushes: list[Push], alone_here: set[str] | None = None) -> None:
        """Send them; ``alone_here``, if given, are the codes whose every connection is on
        this process (asked inside the transaction that queued the pushes)."""

    def alone_here(self, codes: set[str]) -> set[str] | None:
        """Those of ``codes`` whose every connection is on this process; None where one
        process serves the study (every page is here)."""


class Unheard:
    """Where nothing listens (tools, some tests): pushes go nowhere."""

    def __call__(self, pushes: list[Push], alone_here: set[str] | None = None) -> None:
        pass

    def alone_here(self, codes: set[str]) -> set[str] | None:
        return None


def _let_others_run() -> None:
    """Yield to the process's other participants (a gevent worker's other greenlets, else
    the other threads)."""
    time.sleep(0)


class Outbox:
    """The pushes of one journey: events for a participant's page, by code."""

    def __init__(self, storage: Storage, teams: RealTeams, state: Callable[[str], dict[str, Any]],
                 notify: Notify, pause: Callable[[], None] = _let_others_run) -> None:
        self.storage = storage
        self.teams = teams
        self.state = state
        self.notify = notify
        self.pause = pause
        # Each thread's own (each greenlet's, under gevent): events of several participants
        # share a commit, and one of them flushing must not send the pushes of an event that
        # began after that commit and has not committed yet, or never will.
        self._queued = threading.local()

    @property
    def pushes(self) -> list[Push]:
        """The pushes this thread queued since its last ``flush``."""
        if not hasattr(self._queued, "pushes"):
            self._queued.pushes = []
        return self._queued.pushes

    def queue(self, code: str, event: str, payload: dict[str, Any]) -> None:
        """Keep one push until this thread's next ``flush``."""
        self.pushes.append((code, event, payload))

    def queue_states(self, participant_ids: set[int]) -> None:
        """Keep the page state of each of these participants still on record."""
        for code in self.teams.codes(participant_ids):
            self.queue(code, "state", self.state(code))

    def push_states(self, participant_ids: set[int]) -> None:
        """Push the page state of each of these participants (after their team changed),
        each sent as soon as it is built, with a pause before the next: teams formed
        together keep one clock, so a tick pushes dozens of states at once, and building
        them in one stretch held every other participant's acknowledgement back by
        20-40 ms once a second (teams of three, 1,000 people). Where their pages are is
        asked once for all of them."""
        self.flush()
        codes = self.teams.codes(participant_ids)
        alone_here = self.notify.alone_here(set(codes)) if codes else None
        for code in codes:
            self.notify([(code, "state", self.state(code))], alone_here)
            self.pause()

    def announce(self, code: str) -> None:
        """Push the participant's page state (after a change made outside their page)."""
        if self.storage.participant(code) is None:
            return
        self.queue(code, "state", self.state(code))
        self.flush()

    def locate(self) -> None:
        """Ask where the pages of this thread's pushes are, inside the transaction that
        queued them: a read after it would find the other processes' commits and read
        SQLite's pages again, and a tab joining elsewhere meanwhile waits for this commit
        and then reads the state itself. A push queued after this goes through the message
        queue, as any push to a page that may be elsewhere."""
        if self.pushes:
            self._queued.alone_here = self.notify.alone_here(
                {code for code, _, _ in self.pushes})

    def flush(self) -> None:
        """Send the pushes this thread collected while writing, once its transaction
        committed."""
        pushes, self._queued.pushes = self.pushes, []
        alone_here, self._queued.alone_here = getattr(self._queued, "alone_here", None), None
        if pushes:
            self.notify(pushes, alone_here)

    @contextlib.contextmanager
    def forgotten_on_failure(self) -> Iterator[None]:
        """Around an operation that flushes when it succeeds: if it raises, what it queued
        is forgotten rather than sent by this thread's next flush."""
        try:
            yield
        except BaseException:
            self._queued.pushes = []  # their transaction was rolled back
            self._queued.alone_here = None
            raise
