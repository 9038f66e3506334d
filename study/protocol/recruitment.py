"""Recruitment platforms: the participant ids their start links carry, and the link or code
each way out of the study gives a participant (docs/recruitment.md).

A recruitment id ends up in the bulk bonus file a lab pastes into the platform, so only an
id of the platform's documented format is accepted at enrolment: a link carrying anything
else (a comma, a line break, a formula, ten kilobytes) creates no participant. A protocol
may declare its own pattern (``[recruitment] id_pattern``) for a platform not listed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class IdFormat:
    """The ids a start link's ``id_parameter`` may carry: ``pattern`` must match a whole id."""

    source: str  # the platform the pattern is documented by, or the protocol
    pattern: str


# The platforms' documented participant ids, by the query parameter each one fills in:
# Prolific ids are 24 lower-case hexadecimal digits; SONA's survey codes are 2 to 7 digits
# without a leading zero; MTurk worker ids are "A" and capital letters or digits (64 at
# most), and CloudResearch's anonymised worker ids start with "TP_".
PLATFORM_ID_FORMATS = {
    "PROLIFIC_PID": IdFormat("Prolific", r"[0-9a-f]{24}"),
    "id": IdFormat("SONA", r"[1-9][0-9]{1,6}"),
    "workerId": IdFormat("MTurk", r"A[A-Z0-9]{1,63}|TP_[A-Z0-9]{1,61}"),
}
# Any other parameter: letters, digits, '-' and '_', starting with a letter or digit.
OTHER_ID_FORMAT = IdFormat("any platform", r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# No id is longer, whatever a protocol's pattern allows (checked before the pattern runs).
MAX_ID_LENGTH = 128

# The ways a participant's study ends, each with its own completion link or code.
OUTCOMES = ("finished", "lobby_timeout", "unmatched", "dropped", "withdrawn", "declined",
            "aborted")
OUTCOME_MEANINGS = {
    "finished": "reached the final page",
    "lobby_timeout": "waited in the lobby until its timer ran out, or left it after the wait",
    "unmatched": "no team or teammate could be formed for them",
    "dropped": "away from a team for too long, so an agent took over their seat",
    "withdrawn": "withdrew and had their data deleted",
    "declined": "did not consent",
    "aborted": "ended by the experimenter in the console",
}


def id_format(parameter: str, pattern: str | None = None) -> IdFormat:
    """The protocol's own pattern, else the platform's of ``parameter``, else any id."""
    if pattern is not None:
        return IdFormat("the protocol's id_pattern", pattern)
    return PLATFORM_ID_FORMATS.get(parameter, OTHER_ID_FORMAT)


def is_valid_id(value: str, id_format: IdFormat) -> bool:
    """Whether ``value`` is an id of the format: at most ``MAX_ID_LENGTH`` printable
    characters, all of them matched by the pattern."""
    if len(value) > MAX_ID_LENGTH or not value.isprintable():
        return False
    return re.fullmatch(id_format.pattern, value) is not None


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot serve as an id pattern (None when it can)."""
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        return f"is not a regular expression: {error}"
    if compiled.fullmatch(""):
        return "matches an empty id; it must ask for at least one character"
    return None


@dataclass(frozen=True)
class EndLink:
    """Where a way out of the study sends the participant: an address (``{id}`` is the
    participant's recruitment id), a code they copy into the platform, or both."""

    url: str | None = None
    code: str | None = None

    def address(self, recruitment_id: str | None) -> str | None:
        """The address with ``{id}`` filled in (URL-encoded); None without one."""
        from urllib.parse import quote

        if not self.url:
            return None
        return self.url.replace("{id}", quote(recruitment_id or "", safe=""))


def bonus_summary(rule: Any) -> str:
    """A ``[bonus]`` in words: what it pays, for which reason (``study check``, ``study
    export --bonus``)."""
    parts = [f"{rule.per_cookie:g} per cookie, {rule.per_team_cookie:g} per team cookie"]
    if rule.per_lobby_minute:
        parts.append(f"{rule.per_lobby_minute:g} per minute in the lobby"
                     + (f" (at most {rule.lobby_cap:g})" if rule.lobby_cap is not None else ""))
    if rule.unmatched:
        parts.append(f"{rule.unmatched:g} for an unmatched end")
    if rule.teammate_dropped:
        parts.append(f"{rule.teammate_dropped:g} when an agent takes over a teammate's seat")
    cap = f"; at most {rule.cap:g} a person" if rule.cap is not None else ""
    return f"{'; '.join(parts)}{cap} ({rule.currency})"
