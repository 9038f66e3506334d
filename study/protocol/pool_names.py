"""The team-type and most-capable-reading names a pool spec may use: plain strings, so a
spec is read and checked without numpy (``study.pool.teamtypes`` classifies with them)."""

from __future__ import annotations

# "mixed-reversed" is MODEL.md's remaining case (the most capable human positively
# correlated, another negatively): the paper's prior counts it as Mixed, but its Mixed
# results describe the most capable human as the negatively correlated one, so the pool
# keeps the two apart and a protocol says which it means.
TEAM_TYPES = ("mixed", "twins", "negative", "mixed-reversed")

# Readings of "the most capable human" (MODEL.md, Team types). The first is MODEL.md's
# and the default; the second is the earlier one, kept so old results can be rebuilt.
COMPARATIVE_ADVANTAGE = "comparative-advantage"
HIGHEST_COEFFICIENT = "highest-coefficient"
MOST_CAPABLE_READINGS = (COMPARATIVE_ADVANTAGE, HIGHEST_COEFFICIENT)

# How the agent teammate is chosen (MODEL.md, "Forming the team under study"):
# typed: the nearest member whose live team with the participant meets the teammate filter
# (and gives the two robots different plans); distinct: the nearest member unless both
# robots would follow one plan with it; nearest: exactly the paper's Eq. 6.
TEAMMATE_RULES = ("typed", "distinct", "nearest")
# What a participant whom no pool member places in the target team meets.
UNPLACED = ("unmatched", "continue")
