"""Building a pool file: chunks of teams sampled, solved and written as Parquet row groups.

Chunks run on local threads (numpy releases the GIL in the heavy array work) or, with a
scheduler address, on a Dask cluster. Only a bounded window of chunks is in flight and
they are written in order, so memory stays bounded whatever the pool size.
"""

from __future__ import annotations

import os
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from study.allocation.model import (
    InvalidInput,
    code_goal_rewards,
    state_space,
    validate_coefficients,
)
from study.pool.columns import team_column_slices
from study.pool.sampling import sample_teams
from study.pool.store import pool_metadata
from study.pool.teamtypes import TEAM_TYPES
from study.protocol.pool_spec import DEFAULT_CHUNK, PoolSpec


def chunk_table(spec: PoolSpec, start: int, stop: int) -> pa.Table:
    """Teams ``start .. stop - 1``: sampled, validated, solved, as an Arrow table."""
    c, p = sample_teams(spec, start, stop)
    validate_coefficients(c, p)
    refuse_changing_code(spec, c, p, start)
    slices = team_column_slices(spec, c, p)
    labels = pa.array(TEAM_TYPES)
    arrays = {}
    for name in slices[0]:
        if name == "team_type":
            parts = [pa.DictionaryArray.from_arrays(pa.array(part[name]), labels)
                     for part in slices]
        else:
            parts = [pa.array(part[name]) for part in slices]
        arrays[name] = pa.chunked_array(parts)
    return pa.table(arrays)


def refuse_changing_code(spec: PoolSpec, c: np.ndarray, p: np.ndarray, start: int) -> None:
    """Each goal reward given as code evaluated twice on the chunk's teams, every goal:
    values that change between the two are refused, so a pool never holds goals that
    depend on when its teams were solved (its digest names the code, not the moment)."""
    goals = state_space(spec.humans, spec.kits).goal_allocations
    for name in spec.algorithms:
        code = spec.algorithm(name).code
        if code is None:
            continue
        first, second = (code_goal_rewards(code, c, p, goals) for _ in range(2))
        differs = np.argwhere(first != second)
        if len(differs):
            team, goal = (int(i) for i in differs[0])
            raise InvalidInput("python", code.source, (
                f"algorithm {name} returned other values on a second evaluation of the same "
                f"pool teams (team {start + team}, goal {goal}: {float(first[team, goal])!r}, "
                f"then {float(second[team, goal])!r}); a goal reward must be deterministic"))


def default_workers() -> int:
    """Compute threads when none are asked for: one per core but the one the writer
    takes (measured fastest on two cores: the build is bound by writing)."""
    return max(1, (os.cpu_count() or 1) - 1)


def chunk_ranges(teams: int, chunk: int) -> list[tuple[int, int]]:
    return [(start, min(start + chunk, teams)) for start in range(0, teams, chunk)]


def _in_order(submit: Callable[[int, int], Any], ranges: list[tuple[int, int]],
              window: int) -> Iterator[pa.Table]:
    """Results of ``submit(start, stop)`` futures in range order, at most ``window`` ahead."""
    pending: deque[Future] = deque()
    for start, stop in ranges:
        pending.append(submit(start, stop))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _local_tables(spec: PoolSpec, ranges: list[tuple[int, int]],
                  workers: int) -> Iterator[pa.Table]:
    with ThreadPoolExecutor(max_workers=workers) as executor:
        yield from _in_order(lambda a, b: executor.submit(chunk_table, spec, a, b), ranges,
                             2 * workers)


def _dask_tables(spec: PoolSpec, ranges: list[tuple[int, int]],
                 scheduler: str) -> Iterator[pa.Table]:
    from distributed import Client

    try:
        client = Client(scheduler, timeout="20s")
    except (OSError, TimeoutError) as error:
        raise InvalidInput("--scheduler", scheduler, f"cannot connect ({error})") from None
    with client:
        window = 2 * max(1, sum(client.nthreads().values()))
        yield from _in_order(lambda a, b: client.submit(chunk_table, spec, a, b, pure=False),
                             ranges, window)


def _writer_options(schema: pa.Schema) -> dict[str, Any]:
    """Uncompressed (a cached pool is rebuilt, not shipped; a codec only costs time), the
    label column dictionary-encoded, and the small-integer columns (goals, rounds, the
    most capable human) delta bit-packed: as small as a dictionary (8 against 5 MB for
    500,000 teams) at about half its writing time. Random floats are stored plain."""
    integers = [f.name for f in schema
                if pa.types.is_integer(f.type) and not pa.types.is_dictionary(f.type)]
    return {"compression": "none", "use_dictionary": ["team_type"],
            "column_encoding": {name: "DELTA_BINARY_PACKED" for name in integers}}


def _write(tables: Iterator[pa.Table], path: Path, metadata: dict[bytes, bytes],
           advance: Callable[[int], Any]) -> None:
    """One row group per table; the schema (with the pool metadata) from the first."""
    writer: pq.ParquetWriter | None = None
    try:
        for table in tables:
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema.with_metadata(metadata),
                                          **_writer_options(table.schema))
            writer.write_table(table, row_group_size=len(table))
            advance(len(table))
    finally:
        if writer is not None:
            writer.close()


def build_pool(spec: PoolSpec, out: Path | str, *, chunk: int = DEFAULT_CHUNK,
               workers: int | None = None, scheduler: str | None = None,
               progress: bool | None = None) -> Path:
    """Write the pool of ``spec`` to ``out`` (Parquet); the file appears only when complete.

    ``chunk`` teams are solved per task and written as one row group; ``workers`` local
    threads (default: ``default_workers()``) or a Dask ``scheduler`` address run the
    tasks.
    ``progress`` None shows the bar only on a terminal. The content does not depend on
    ``chunk``, ``workers`` or ``scheduler``.
    """
    if chunk < 1:
        raise InvalidInput("chunk", chunk, "must be at least 1 team")
    if workers is not None and workers < 1:
        raise InvalidInput("workers", workers, "must be at least 1")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ranges = chunk_ranges(spec.teams, chunk)
    if scheduler is not None:
        tables = _dask_tables(spec, ranges, scheduler)
    else:
        tables = _local_tables(spec, ranges, workers or default_workers())
    partial = out.with_name(f".{out.name}.{uuid.uuid4().hex}.partial")
    try:
        with tqdm(total=spec.teams, unit="team", desc=f"pool {spec.name}",
                  disable=None if progress is None else not progress) as bar:
            _write(tables, partial, pool_metadata(spec), bar.update)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def pool_file_name(spec: PoolSpec) -> str:
    """``<name>-<digest>.parquet``: a changed spec never reuses an old file."""
    return f"{spec.name}-{spec.digest()[:16]}.parquet"


def ensure_pool(spec: PoolSpec, directory: Path | str, **options: Any) -> Path:
    """The path of the pool file for ``spec`` in ``directory``, built first if missing."""
    path = Path(directory) / pool_file_name(spec)
    if not path.exists():
        build_pool(spec, path, **options)
    return path

