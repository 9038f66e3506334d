"""Forming the team under study: pool members ranked by how near they are to a
participant, each with the live team it would make (MODEL.md, "Forming the team under
study").

The *live team* is the participant's measured coefficients in the matched member's place
and that member's teammate in the other. It is classified with the very functions that
classified the pool (``teamtypes``), and it meets the target when the teammate filter's
criteria (team types, coefficient intervals, fair gap) hold for it and the participant
has the filter's role in it. The pool member's own type is only a proxy for this.

The nearest members come from the k-d tree; if none of the first ``SEARCH_FIRST`` forms
the target, the rest are scanned nearest first, in chunks, after a prefilter that for two
task types keeps only members whose correlation and comparative advantage can give the
target (a superset: every candidate is then classified exactly).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from study.allocation.model import first_argmax
from study.pool.match import Match, MemberIndex, participant_vector
from study.pool.teamtypes import most_capable_human, positively_correlated, team_type_codes
from study.protocol.pool_names import TEAM_TYPES
from study.protocol.pool_spec import PoolSpec, TeammateFilter
from study.task.decorator import HIGHEST, LOWEST

# Members examined through the k-d tree before the scan of the rest.
SEARCH_FIRST = 256
# Members classified at once during the scan, nearest first.
SCAN_CHUNK = 2048
# At most this many members are classified for one participant: the search is bounded.
SEARCH_LIMIT = 200_000


def fair_gap_reach(c: np.ndarray, p: np.ndarray) -> float:
    """The largest fair gap a person with coefficients ``c``, ``p`` [types] can have in
    any team of two whose kits let each human take a whole session of one type (8 + 8).

    A fair gap is at most the Efficient goal's ``|F|``, and ``F`` is the two humans'
    ``sum_j (c_j + p_j) T_j``, the person's less the teammate's, over twice the rounds: at
    most half the person's largest ``c + p`` less a teammate at 0.01, or half a teammate at
    0.99 less the person's smallest. A teammate at those bounds on one type, and whose other
    type lets Fair balance ``F``, attains it (docs/teams-by-design.md), so a person whose
    reach is not above a protocol's ``fair_gap_above`` can be placed by no pool at all."""
    both = np.add(c, p)
    return float(max((both.max() - 2 * LOWEST) / 2, (2 * HIGHEST - both.min()) / 2))


@dataclass(frozen=True)
class Candidate:
    """One pool member as the participant's match, and the live team it makes."""

    match: Match
    rank: int  # members nearer than this one (0: the Eq. 6 nearest)
    live_type: str
    participant_role: str  # "most-capable" or "other" in the live team
    meets_target: bool


def member_match(index: MemberIndex, position: int, distance: float) -> Match:
    """The ``Match`` of one indexed member."""
    member = int(index.members[position])
    return Match(int(index.teams[position]), member, 1 - member,
                 index.teammate_c[position].copy(), index.teammate_p[position].copy(),
                 float(distance), index.description)


def live_coefficients(index: MemberIndex, positions: np.ndarray, c: np.ndarray,
                      p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``c, p [k, 2, n]``: the participant in each member's place, its teammate beside."""
    rows = np.arange(len(positions))
    members = index.members[positions].astype(np.intp)
    live_c = np.empty((len(positions), 2, len(c)))
    live_p = np.empty_like(live_c)
    live_c[rows, members], live_p[rows, members] = c, p
    live_c[rows, 1 - members] = index.teammate_c[positions]
    live_p[rows, 1 - members] = index.teammate_p[positions]
    return live_c, live_p


@dataclass(frozen=True)
class LiveTeams:
    """Live teams of a batch of members, classified."""

    codes: np.ndarray  # [k] indices into TEAM_TYPES
    participant_top: np.ndarray  # [k] whether the participant is the most capable human
    meets: np.ndarray  # [k] whether the live team meets the target


def classify(spec: PoolSpec, target: TeammateFilter, index: MemberIndex,
             positions: np.ndarray, c: np.ndarray, p: np.ndarray,
             preferred: int | None = None) -> LiveTeams:
    """Type, participant's role and target check of the live teams of ``positions``;
    ``preferred``: the type a participant with tied preferences counts as preferring."""
    from study.pool.columns import fair_gaps

    live_c, live_p = live_coefficients(index, positions, c, p)
    positive = positively_correlated(live_c, live_p)
    if preferred is not None:
        positive[np.arange(len(positions)), index.members[positions]] = positively(
            c, p, preferred)
    codes = team_type_codes(live_c, live_p, spec.most_capable_reading, positive)
    top = most_capable_human(live_c, spec.most_capable_reading) == index.members[positions]
    criteria = target.criteria
    if not len(positions):
        empty = np.zeros(0, dtype=bool)
        return LiveTeams(np.zeros(0, dtype=np.int8), empty, empty)
    gaps = fair_gaps(spec, live_c, live_p) if criteria.needs_fair_gap else None
    meets = criteria.mask(live_c, live_p, codes, gaps)
    if target.role == "most-capable":
        meets &= top
    elif target.role == "other":
        meets &= ~top
    return LiveTeams(codes, top, meets)


def candidate(spec: PoolSpec, target: TeammateFilter, index: MemberIndex, position: int,
              distance: float, rank: int, c: np.ndarray, p: np.ndarray,
              preferred: int | None = None) -> Candidate:
    """One member as a ``Candidate`` (e.g. the Eq. 6 nearest, for the record)."""
    live = classify(spec, target, index, np.array([position]), c, p, preferred)
    return Candidate(member_match(index, position, distance), rank,
                     TEAM_TYPES[int(live.codes[0])],
                     "most-capable" if live.participant_top[0] else "other",
                     bool(live.meets[0]))


def nearest_first(index: MemberIndex, point: np.ndarray, count: int,
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Positions and distances of the ``count`` nearest members, nearest first (ties to
    the lowest team, then the lowest human)."""
    distances, positions = index.tree.query(point[None], k=count)
    positions = np.atleast_1d(positions[0]).astype(np.intp)
    distances = np.sqrt(((index.points[positions] - point) ** 2).sum(axis=1))
    order = np.lexsort((index.members[positions], index.teams[positions], distances))
    return positions[order], distances[order]


def targets(spec: PoolSpec, target: TeammateFilter, index: MemberIndex, c: object,
            p: object, preferred: int | None = None) -> Iterator[Candidate]:
    """The members whose live team with the participant meets the target, nearest first:
    first among the ``SEARCH_FIRST`` nearest, then among the rest (at most
    ``SEARCH_LIMIT`` classified)."""
    if index.tree is None:
        return
    point = participant_vector(c, p, index.types)
    c_p, p_p = point[:index.types], point[index.types:]
    first = min(SEARCH_FIRST, len(index))
    positions, distances = nearest_first(index, point, first)
    yield from _meeting(spec, target, index, positions, distances, np.arange(first), c_p, p_p,
                        preferred)
    if first == len(index):
        return
    rest = np.ones(len(index), dtype=bool)
    rest[positions] = False
    rest &= prefilter(index, target, c_p, p_p, preferred)
    yield from _scan(spec, target, index, point, np.flatnonzero(rest), c_p, p_p, preferred)


def _meeting(spec: PoolSpec, target: TeammateFilter, index: MemberIndex,
             positions: np.ndarray, distances: np.ndarray, ranks: np.ndarray, c: np.ndarray,
             p: np.ndarray, preferred: int | None) -> Iterator[Candidate]:
    live = classify(spec, target, index, positions, c, p, preferred)
    for k in np.flatnonzero(live.meets):
        yield Candidate(member_match(index, int(positions[k]), float(distances[k])),
                        int(ranks[k]), TEAM_TYPES[int(live.codes[k])],
                        "most-capable" if live.participant_top[k] else "other", True)


def _scan(spec: PoolSpec, target: TeammateFilter, index: MemberIndex, point: np.ndarray,
          positions: np.ndarray, c: np.ndarray, p: np.ndarray,
          preferred: int | None) -> Iterator[Candidate]:
    """The members at ``positions``, nearest first in chunks; a candidate's rank counts
    every member nearer than it, prefiltered or not."""
    every = np.sqrt(((index.points - point) ** 2).sum(axis=1))
    distances = every[positions]
    classified = 0
    while len(positions) and classified < SEARCH_LIMIT:
        size = min(SCAN_CHUNK, len(positions))
        part = (np.argpartition(distances, size - 1)[:size] if size < len(positions)
                else np.arange(len(positions)))
        chosen, chosen_distances = positions[part], distances[part]
        order = np.lexsort((index.members[chosen], index.teams[chosen], chosen_distances))
        chosen, chosen_distances = chosen[order], chosen_distances[order]
        ranks = np.searchsorted(np.sort(every), chosen_distances, side="left")
        yield from _meeting(spec, target, index, chosen, chosen_distances, ranks, c, p,
                            preferred)
        keep = np.ones(len(positions), dtype=bool)
        keep[part] = False
        positions, distances = positions[keep], distances[keep]
        classified += size


def prefilter(index: MemberIndex, target: TeammateFilter, c: np.ndarray,
              p: np.ndarray, preferred: int | None = None) -> np.ndarray:
    """``[members]``: those whose live team can meet the target's team types and role (a
    superset, for two task types and the comparative-advantage reading; otherwise every
    member). With two types the most capable human is the one whose capabilities differ
    more, so the teammate's ``|c[1] - c[0]|`` against the participant's decides it, ties
    left to the exact check."""
    every = np.ones(len(index), dtype=bool)
    if index.types != 2 or index.reading != "comparative-advantage":
        return every
    spread = np.abs(index.teammate_c[:, 1] - index.teammate_c[:, 0])
    own = abs(float(c[1] - c[0]))
    can_top = {"most-capable": spread <= own, "other": np.zeros_like(every),
               "any": spread <= own}[target.role]
    can_other = {"most-capable": np.zeros_like(every), "other": spread >= own,
                 "any": spread >= own}[target.role]
    types = target.criteria.team_types
    if types is None:
        return can_top | can_other
    participant_positive = positively(c, p, preferred)
    teammate_positive = index.teammate_positive
    allowed = np.zeros(len(index), dtype=bool)
    for name in types:
        for participant_top, mask in ((True, can_top), (False, can_other)):
            needed = _teammate_sign(name, participant_positive, participant_top)
            if needed is not None:
                allowed |= mask & (teammate_positive == needed)
    return allowed


def _teammate_sign(team_type: str, participant_positive: bool,
                   participant_top: bool) -> bool | None:
    """The teammate's correlation a team type needs, given the participant's sign and
    role; None when the participant's sign already rules the type out."""
    top_positive, other_positive = {"mixed": (False, True), "twins": (True, True),
                                    "negative": (False, False),
                                    "mixed-reversed": (True, False)}[team_type]
    own, teammate = ((top_positive, other_positive) if participant_top
                     else (other_positive, top_positive))
    return teammate if own == participant_positive else None


def positively(c: np.ndarray, p: np.ndarray, preferred: int | None = None) -> bool:
    """Whether one human's capabilities and preferences go together; with ``preferred``
    (tied preferences broken by a recorded draw), whether their most capable type is it."""
    if preferred is not None:
        return int(first_argmax(np.asarray(c, dtype=float))) == preferred
    return bool(positively_correlated(c[None, None], p[None, None])[0, 0])

