"""Drawing a pool's teams reproducibly, in fixed blocks.

Team ``k`` always lies in block ``k // SAMPLING_BLOCK``, and each block draws from its own
generator ``SeedSequence(seed, spawn_key=(block,))``. So any team range can be produced
on any worker, in any order, and the pool is the same whatever the processing chunk
size or the number of workers; a smaller pool with the same seed is a prefix of a
larger one.
"""

from __future__ import annotations

import math

import numpy as np

from study.allocation.model import InvalidInput
from study.pool.columns import fair_gaps
from study.pool.teamtypes import team_type_codes
from study.protocol.pool_spec import PoolSpec, interval_arrays

SAMPLING_BLOCK = 16_384
MAX_CANDIDATES = 1 << 20
GIVE_UP_AFTER = 20_000_000


def block_generator(seed: int, block: int) -> np.random.Generator:
    """The generator of one sampling block, independent of every other block."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(block,)))


def _candidates(spec: PoolSpec, rng: np.random.Generator,
                count: int) -> tuple[np.ndarray, np.ndarray]:
    shape = (count, spec.humans, spec.task_types)
    draws = []
    for intervals in (spec.sample_c, spec.sample_p):
        lo, hi = interval_arrays(intervals)
        values = rng.random(shape)
        values *= hi - lo
        values += lo
        draws.append(values)
    return draws[0], draws[1]


def _accepted(spec: PoolSpec, c: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The rejection step of ``pool.accept``: cheap criteria first, the fair gap last."""
    codes = (team_type_codes(c, p, spec.most_capable_reading)
             if spec.accept.team_types is not None else None)
    keep = spec.accept.coefficient_mask(c, p, codes)
    if spec.accept.fair_gap_above is not None and keep.any():
        survivors = np.flatnonzero(keep)
        keep[survivors] = fair_gaps(spec, c[survivors], p[survivors]) > spec.accept.fair_gap_above
    return keep


def _next_draw(wanted: int, kept: int, drawn: int) -> int:
    """How many candidates to draw next: enough for the rate seen so far, with margin."""
    if drawn == 0:
        return wanted
    rate = max(kept, 1) / drawn
    return min(MAX_CANDIDATES, math.ceil(wanted / rate * 1.1) + 64)


def sample_block(spec: PoolSpec, block: int) -> tuple[np.ndarray, np.ndarray]:
    """``SAMPLING_BLOCK`` accepted teams ``c, p [B, h, n]`` of one block."""
    rng = block_generator(spec.seed, block)
    kept_c: list[np.ndarray] = []
    kept_p: list[np.ndarray] = []
    kept = drawn = 0
    while kept < SAMPLING_BLOCK:
        c, p = _candidates(spec, rng, _next_draw(SAMPLING_BLOCK - kept, kept, drawn))
        keep = _accepted(spec, c, p)
        drawn += len(c)
        kept += int(keep.sum())
        kept_c.append(c[keep])
        kept_p.append(p[keep])
        if kept == 0 and drawn >= GIVE_UP_AFTER:
            raise InvalidInput("pool.accept", spec.accept.describe(),
                               f"none of {drawn:,} sampled teams meets it")
    return (np.concatenate(kept_c)[:SAMPLING_BLOCK], np.concatenate(kept_p)[:SAMPLING_BLOCK])


def sample_teams(spec: PoolSpec, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Teams ``start .. stop - 1`` of the pool, ``c, p [stop - start, h, n]``."""
    first, last = start // SAMPLING_BLOCK, (stop - 1) // SAMPLING_BLOCK
    blocks = [sample_block(spec, block) for block in range(first, last + 1)]
    offset = start - first * SAMPLING_BLOCK
    c = np.concatenate([b[0] for b in blocks])[offset:offset + stop - start]
    p = np.concatenate([b[1] for b in blocks])[offset:offset + stop - start]
    return c, p
