"""Pool files: their metadata and the loaded ``Pool`` that the live study matches against."""

from __future__ import annotations

import json
import platform
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from study.allocation.model import InvalidInput
from study.pool.match import Match, MemberIndex
from study.pool.teamtypes import TEAM_TYPES
from study.protocol.pool_spec import POOL_FORMAT, Criteria, PoolSpec, TeammateFilter

METADATA_KEY = b"study.pool"
_VERSIONED = ("fair-teaming-study", "numpy", "scipy", "pyarrow", "pymdptoolbox")


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = package_metadata.version(name)
        except package_metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def pool_metadata(spec: PoolSpec) -> dict[bytes, bytes]:
    """What a pool file records so it can be traced and rebuilt: the spec (with its seed
    and FEA bounds and their source), its digest, and the package versions."""
    record = {
        "format": POOL_FORMAT,
        "name": spec.name,
        "digest": spec.digest(),
        "teams_digest": spec.teams_digest(),
        "teams": spec.teams,
        "seed": spec.seed,
        "most_capable_reading": spec.most_capable_reading,
        "fea_bounds": None if spec.fea is None else {
            "lo": spec.fea.lo, "hi": spec.fea.hi, "w": spec.fea.w, "source": spec.fea.source},
        "spec": spec.to_dict(),
        "versions": _versions(),
    }
    return {METADATA_KEY: json.dumps(record, sort_keys=True).encode()}


def read_metadata(path: Path | str) -> dict[str, Any]:
    """The pool record of a pool file; a clear error for anything else."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as error:
        raise InvalidInput("pool", str(path), f"cannot be read as Parquet ({error})") from None
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise InvalidInput("pool", str(path), "is not a pool file (no pool metadata)")
    record = json.loads(raw)
    if record.get("format") != POOL_FORMAT:
        raise InvalidInput("pool", str(path), f"has pool format {record.get('format')}; "
                                              f"this version reads format {POOL_FORMAT}")
    return record


def spec_of(path: Path | str, record: dict[str, Any]) -> PoolSpec:
    return PoolSpec.from_dict(record["spec"], name=record["name"], where=f"{path} metadata")


def coefficients_of(table: pa.Table, humans: int, types: int) -> tuple[np.ndarray, np.ndarray]:
    """``c, p [B, h, n]`` from a table's ``c_<i>_<j>`` and ``p_<i>_<j>`` columns."""
    arrays = []
    for kind in ("c", "p"):
        columns = [column_values(table.column(f"{kind}_{i}_{j}"))
                   for i in range(humans) for j in range(types)]
        arrays.append(np.stack(columns, axis=1).reshape(len(table), humans, types))
    return arrays[0], arrays[1]


_NUMPY_TYPES = {arrow: np.dtype(name) for arrow, name in (
    (pa.float64(), "float64"), (pa.float32(), "float32"), (pa.int8(), "int8"),
    (pa.int16(), "int16"), (pa.int32(), "int32"), (pa.int64(), "int64"),
    (pa.uint8(), "uint8"))}


def column_values(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A column of numbers as numpy: views of its data buffers when it has no nulls.

    ``to_numpy`` would give the same values, but its first call in a process imports
    pandas (about 0.25 s), which opening a pool or printing its summary need not pay.
    """
    chunks = getattr(column, "chunks", [column])
    if column.type not in _NUMPY_TYPES or column.null_count:
        return column.to_numpy()
    dtype = _NUMPY_TYPES[column.type]
    parts = [np.frombuffer(chunk.buffers()[1], dtype=dtype, count=len(chunk),
                           offset=chunk.offset * dtype.itemsize) for chunk in chunks]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def team_type_codes_of(column: pa.ChunkedArray | pa.DictionaryArray) -> np.ndarray:
    """``[B]`` indices into ``TEAM_TYPES`` from the dictionary-encoded ``team_type``."""
    parts = []
    for chunk in getattr(column, "chunks", [column]):
        remap = np.array([TEAM_TYPES.index(name) for name in chunk.dictionary.to_pylist()],
                         dtype=np.int8)
        parts.append(remap[column_values(chunk.indices)])
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int8)


def read_columns(path: Path | str, columns: list[str]) -> pa.Table:
    """The given columns of every team (``pq.read_table`` would import pandas, about
    0.2 s, for no use here)."""
    return pq.ParquetFile(path).read(columns=columns)


def row_groups(path: Path | str, columns: list[str]) -> Iterator[pa.Table]:
    """The given columns, one Parquet row group at a time (memory bounded by a row group;
    one thread per group, measured faster here than ``iter_batches``)."""
    file = pq.ParquetFile(path)
    for group in range(file.num_row_groups):
        yield file.read_row_group(group, columns=columns, use_threads=False)


def coefficient_names(humans: int, types: int) -> list[str]:
    return [f"{kind}_{i}_{j}" for kind in ("c", "p") for i in range(humans)
            for j in range(types)]


@dataclass
class Pool:
    """An opened pool file: its spec and record, columns read on first use (only those a
    question needs), and member indexes per teammate filter.

    Opening reads the metadata alone; matching streams the columns its filter needs and
    keeps only the eligible members, so a pool of ten million teams opens for matching
    without holding its other columns in memory.
    """

    path: Path
    spec: PoolSpec
    record: dict[str, Any]
    teams: int
    _columns: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _indexes: dict[TeammateFilter, MemberIndex] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, path: Path | str) -> Pool:
        """The pool's metadata; nothing else is read yet."""
        path = Path(path)
        record = read_metadata(path)
        return cls(path, spec_of(path, record), record, pq.ParquetFile(path).metadata.num_rows)

    @classmethod
    def load(cls, path: Path | str) -> Pool:
        """Open the file and index the members the spec's teammate filter allows."""
        pool = cls.open(path)
        if pool.spec.humans == 2:
            pool.index(pool.spec.teammate)
        return pool

    @property
    def fea_bounds(self) -> tuple[float, float] | None:
        """The ``(lo, hi)`` the pool's FEA columns were computed with (None without FEA)."""
        bounds = self.record["fea_bounds"]
        return None if bounds is None else (bounds["lo"], bounds["hi"])

    def column(self, name: str) -> np.ndarray:
        """One column of every team, read once."""
        if name not in self._columns:
            if name not in pq.read_schema(self.path).names:
                raise InvalidInput("column", name, f"is not in pool {self.path}")
            table = read_columns(self.path, [name])
            self._columns[name] = (team_type_codes_of(table.column(name))
                                   if name == "team_type" else column_values(table.column(name)))
        return self._columns[name]

    @cached_property
    def coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """``c, p [B, h, n]`` of every team."""
        names = coefficient_names(self.spec.humans, self.spec.task_types)
        return coefficients_of(read_columns(self.path, names), self.spec.humans,
                               self.spec.task_types)

    @property
    def team_types(self) -> np.ndarray:
        """``[B]`` indices into ``TEAM_TYPES``."""
        return self.column("team_type")

    def eligible(self, teammate: TeammateFilter | None = None) -> np.ndarray:
        """``[B]`` booleans: the teams the filter (default: the spec's) admits."""
        criteria = (teammate or self.spec.teammate).criteria
        c, p = self.coefficients
        gaps = self.column("fair_gap") if criteria.needs_fair_gap else None
        return criteria.mask(c, p, self.team_types, gaps)

    @cached_property
    def admitted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows, ``c`` and ``p`` of the teams the spec's filter admits, kept: a lobby seats
        agents from them inside its write transaction."""
        rows = np.flatnonzero(self.eligible())
        c, p = self.coefficients
        return rows, c[rows], p[rows]

    def index(self, teammate: TeammateFilter) -> MemberIndex:
        """The member index of one filter, built on first use and kept."""
        teammate = teammate.members
        if teammate not in self._indexes:
            if self.spec.humans != 2:
                raise InvalidInput("pool", str(self.path),
                                   "teammate matching is defined for two-human teams")
            rows, c, p, top = self._eligible_members(teammate.criteria)
            self._indexes[teammate] = MemberIndex(
                c, p, np.ones(len(rows), dtype=bool), top, teammate.role,
                teammate.describe(), str(self.path), rows=rows,
                reading=self.spec.most_capable_reading)
        return self._indexes[teammate]

    def _eligible_members(self, criteria: Criteria) -> tuple[np.ndarray, np.ndarray,
                                                             np.ndarray, np.ndarray]:
        """Pool rows, ``c``, ``p`` and most capable human of the teams ``criteria`` admits,
        one row group at a time through the columns the filter needs; the coefficients
        are gathered only at the admitted rows."""
        humans, types = self.spec.humans, self.spec.task_types
        coefficients = coefficient_names(humans, types)
        names = [*coefficients, "team_type", "most_capable_human"]
        if criteria.needs_fair_gap:
            names.append("fair_gap")
        parts: list[tuple[np.ndarray, ...]] = []
        offset = 0
        for table in row_groups(self.path, names):
            kept = np.flatnonzero(_admitted(criteria, table, humans, types))
            values = [column_values(table.column(name))[kept] for name in coefficients]
            c = np.stack(values[:humans * types], axis=1).reshape(len(kept), humans, types)
            p = np.stack(values[humans * types:], axis=1).reshape(len(kept), humans, types)
            top = column_values(table.column("most_capable_human"))[kept]
            parts.append((kept + offset, c, p, top))
            offset += table.num_rows
        if not parts:
            return (np.zeros(0, dtype=np.intp), np.zeros((0, humans, types)),
                    np.zeros((0, humans, types)), np.zeros(0, dtype=np.int8))
        rows, c, p, top = (np.concatenate(column) for column in zip(*parts, strict=True))
        return rows, c, p, top

    @cached_property
    def _spec_index(self) -> MemberIndex:
        """The spec filter's index, kept where the live path finds it without hashing the
        filter on every query."""
        return self.index(self.spec.teammate)

    def match(self, c: object, p: object, filter: TeammateFilter | None = None) -> Match:
        """The agent teammate for a participant with coefficients ``c, p`` (``[n]`` each)."""
        index = self._spec_index if filter is None else self.index(filter)
        return index.query(c, p)


def _admitted(criteria: Criteria, table: pa.Table, humans: int, types: int) -> np.ndarray:
    """``[rows]`` booleans of one row group; ``c`` and ``p`` are assembled only when the
    criteria hold coefficient intervals (otherwise a broadcast zero stands in)."""
    if criteria.needs_coefficients:
        c, p = coefficients_of(table, humans, types)
    else:
        c = p = np.broadcast_to(0.0, (table.num_rows, humans, types))
    gaps = column_values(table.column("fair_gap")) if criteria.needs_fair_gap else None
    return criteria.mask(c, p, team_type_codes_of(table.column("team_type")), gaps)
