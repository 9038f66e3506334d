"""Which rounds a server process's clock closes and starts: those of the people connected to it.

With several processes, a person's rounds are kept where their page is connected (the
balancer routes a team's members and a person's tabs to one process), so closing a round,
its teammate's cookies, its team's policy and the state pushed to the page stay on that
process, and the clock's work spreads over the processes with the people instead of piling
up on one. The holder of the scheduler's lease keeps, besides its own people's, the rounds
of people connected to no other live process (a page closed, a process that died) and what
belongs to nobody's connection: the lobby's timers, presence, sessions waiting for members.
A round two processes both see (a person with tabs on both) closes once: the rounds to
close are read inside the closing transaction, which holds the write lock.
"""

from __future__ import annotations

from dataclasses import dataclass

# The connections (``c``) of one participant code, and of any person seated in one team.
CONNECTIONS_OF_CODE = "SELECT 1 FROM connections c WHERE c.code = {code}"
CONNECTIONS_OF_TEAM = ("SELECT 1 FROM seats s JOIN participants p ON p.id = s.participant_id "
                       "JOIN connections c ON c.code = p.code WHERE s.team_id = {team}")


@dataclass(frozen=True)
class Share:
    """A process's part of the study's clock, as SQL conditions on a round's person or team.

    ``lease``: it also keeps what belongs to no connection. ``condition`` is over one
    connection ``c``; a round is this process's if some connection of its people meets it
    (``claimed_elsewhere`` False), or if none does (True)."""

    lease: bool
    condition: str = ""
    params: tuple[object, ...] = ()
    claimed_elsewhere: bool = False

    @property
    def everyone(self) -> bool:
        return not self.condition

    def of_code(self, code: str) -> tuple[str, tuple[object, ...]]:
        """The condition that the person of ``code`` (an SQL expression) is this process's."""
        return self._over(CONNECTIONS_OF_CODE.format(code=code))

    def of_team(self, team: str) -> tuple[str, tuple[object, ...]]:
        """The condition that the team of id ``team`` (an SQL expression) is this process's."""
        return self._over(CONNECTIONS_OF_TEAM.format(team=team))

    def _over(self, connections: str) -> tuple[str, tuple[object, ...]]:
        if self.everyone:
            return "1", ()
        exists = "NOT EXISTS" if self.claimed_elsewhere else "EXISTS"
        return f"{exists} ({connections} AND {self.condition})", self.params


EVERYONE = Share(lease=True)  # one process, a test's clock, a restart's recovery


def connected_here(process: str) -> Share:
    """A process without the lease: the rounds of the people connected to it."""
    return Share(lease=False, condition="c.process = ?", params=(process,))


def unclaimed(process: str, alive_since: float) -> Share:
    """The lease holder: every round but those of people connected to another process
    seen alive since ``alive_since``."""
    return Share(lease=True, condition="c.process != ? AND c.process IN (SELECT id FROM "
                 "processes WHERE last_seen > ?)", params=(process, alive_since),
                 claimed_elsewhere=True)
