"""Pool specifications: the ``[pool]`` section of a protocol, validated.

A spec says how many teams to draw, from which uniform ranges, which candidates to
reject, which algorithms to solve (with FEA's weight and bounds, and where the bounds
came from), and which pool teams a live participant's agent teammate may come from.
Errors name the protocol file, the line and the dotted field.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from study.allocation.terms import (
    ALGORITHMS,
    MEMORY_SCOPES,
    DeclaredAlgorithm,
    InvalidInput,
    terms_problems,
    validate_kits,
)
from study.protocol.pool_names import (
    COMPARATIVE_ADVANTAGE,
    MOST_CAPABLE_READINGS,
    TEAM_TYPES,
    TEAMMATE_RULES,
    UNPLACED,
)
from study.protocol.toml_source import ProtocolError, TomlSource

if TYPE_CHECKING:  # numpy and the model are imported where a spec is used, not read
    import numpy as np

    from study.allocation.model import Algorithm

# Bump when the pool file's columns or the sampling scheme change: it is part of the
# digest, so ``ensure_pool`` never reuses a pool built the old way.
POOL_FORMAT = 2
# Teams per build task and Parquet row group; it does not change the pool's content.
DEFAULT_CHUNK = 65_536
ROLES = ("any", "most-capable", "other")
DEFAULT_RANGE = (0.01, 0.99)

Intervals = tuple[tuple[tuple[float, float], ...], ...]
ErrorFactory = Callable[[str, str], ProtocolError]

_POOL_KEYS = ("teams", "seed", "humans", "kits", "algorithms", "most_capable_reading",
              "sample", "accept", "fea", "teammate")
_SAMPLE_KEYS = ("c", "p")
_CRITERIA_KEYS = ("c", "p", "team_types", "fair_gap_above")
_FEA_KEYS = ("w", "bounds", "bounds_source", "bounds_fixed")
# How a bounds_source names the pool teams its bounds came from (`study pool bounds`,
# `study calibrate`): the teams digest, or its first 16 hex digits.
CITED_TEAMS = re.compile(r"teams digest ([0-9a-f]{8,64})")


@dataclass(frozen=True)
class Criteria:
    """Conditions on a team: coefficient intervals, team types and a fair gap floor."""

    c: Intervals | None = None
    p: Intervals | None = None
    team_types: tuple[str, ...] | None = None
    fair_gap_above: float | None = None

    @property
    def needs_fair_gap(self) -> bool:
        return self.fair_gap_above is not None

    @property
    def needs_coefficients(self) -> bool:
        """Whether the mask reads ``c`` and ``p`` (coefficient intervals are given)."""
        return self.c is not None or self.p is not None

    def mask(self, c: np.ndarray, p: np.ndarray, team_type: np.ndarray,
             fair_gap: np.ndarray | None = None) -> np.ndarray:
        """``[B]`` booleans for teams ``c, p [B, h, n]`` with team type codes ``[B]``."""
        keep = self.coefficient_mask(c, p, team_type)
        if self.fair_gap_above is not None:
            if fair_gap is None:
                raise ValueError("the fair gap criterion needs the fair gaps")
            keep &= fair_gap > self.fair_gap_above
        return keep

    def coefficient_mask(self, c: np.ndarray, p: np.ndarray,
                         team_type: np.ndarray | None) -> np.ndarray:
        """Every criterion but the fair gap, which needs the teams solved."""
        import numpy as np

        keep = np.ones(len(c), dtype=bool)
        for values, intervals in ((c, self.c), (p, self.p)):
            if intervals is not None:
                lo, hi = interval_arrays(intervals)
                keep &= ((values >= lo) & (values <= hi)).all(axis=(1, 2))
        if self.team_types is not None:
            if team_type is None:
                raise ValueError("the team type criterion needs the team types")
            codes = [TEAM_TYPES.index(name) for name in self.team_types]
            keep &= np.isin(team_type, codes)
        return keep

    def describe(self) -> str:
        parts = []
        if self.team_types is not None:
            parts.append("team type in " + "/".join(self.team_types))
        if self.fair_gap_above is not None:
            parts.append(f"fair gap > {self.fair_gap_above:g}")
        for name, intervals in (("c", self.c), ("p", self.p)):
            if intervals is not None:
                parts.append(f"{name} within {_compact(intervals)}")
        return ", ".join(parts) or "every team"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.c is not None:
            data["c"] = _nested_lists(self.c)
        if self.p is not None:
            data["p"] = _nested_lists(self.p)
        if self.team_types is not None:
            data["team_types"] = list(self.team_types)
        if self.fair_gap_above is not None:
            data["fair_gap_above"] = self.fair_gap_above
        return data


@dataclass(frozen=True)
class TeammateFilter:
    """Which pool teams a participant may be matched to, and which member they may be."""

    criteria: Criteria = field(default_factory=Criteria)
    role: str = "any"
    rule: str = "typed"
    unplaced: str = "unmatched"

    def describe(self) -> str:
        role = {"any": "any member", "most-capable": "the most capable human",
                "other": "not the most capable human"}[self.role]
        return f"{self.criteria.describe()}; participant as {role}"

    def to_dict(self) -> dict[str, Any]:
        return {**self.criteria.to_dict(), "role": self.role, "rule": self.rule,
                "unplaced": self.unplaced}

    @property
    def members(self) -> TeammateFilter:
        """The filter as far as it decides which pool members are indexed (the rule and
        what happens to the unplaced do not), so every rule shares one member index."""
        return replace(self, rule="typed", unplaced="unmatched")


@dataclass(frozen=True)
class FeaSettings:
    """FEA's weight and the bounds that scale ``|FE|``, with where the bounds came from;
    ``fixed`` when they are set on purpose rather than derived from this spec's pool."""

    w: float
    lo: float
    hi: float
    source: str
    fixed: bool = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"w": self.w, "bounds": [self.lo, self.hi],
                                "bounds_source": self.source}
        if self.fixed:  # absent when false, so the digests of earlier specs stay
            data["bounds_fixed"] = True
        return data


@dataclass(frozen=True)
class PoolSpec:
    """A validated pool specification (the ``[pool]`` section of a protocol)."""

    teams: int
    seed: int
    humans: int
    kits: tuple[int, ...]
    algorithms: tuple[str, ...]
    sample_c: Intervals
    sample_p: Intervals
    accept: Criteria
    fea: FeaSettings | None
    teammate: TeammateFilter
    name: str = "pool"
    most_capable_reading: str = COMPARATIVE_ADVANTAGE
    declared: tuple[DeclaredAlgorithm, ...] = ()  # the [[algorithms]] among `algorithms`

    @property
    def task_types(self) -> int:
        return len(self.kits)

    @property
    def has_gaps(self) -> bool:
        """Fair and efficiency gaps need both the Fair and the Efficient policies."""
        return {"efficient", "fair"} <= set(self.algorithms)

    def algorithm(self, name: str) -> Algorithm:
        """The model's algorithm the pool solves by ``name``: a preset (FEA with the pool's
        weight and bounds) or a declared one (a fair_equity term on the pool's bounds
        unless it has its own)."""
        from study.allocation.model import Algorithm

        declared = next((a for a in self.declared if a.id == name), None)
        if declared is not None:
            from study.allocation.algorithms import declared_algorithm

            return declared_algorithm(declared, None if self.fea is None
                                      else (self.fea.lo, self.fea.hi))
        if name == "fea" and self.fea is not None:
            return Algorithm("fea", w=self.fea.w, lo=self.fea.lo, hi=self.fea.hi)
        return Algorithm(name)

    @classmethod
    def from_protocol(cls, path: Path | str) -> PoolSpec:
        """Read and validate the ``[pool]`` section of a protocol file (with the
        ``[[algorithms]]`` tables it solves)."""
        source = TomlSource.read(path)
        if "pool" not in source.data or not isinstance(source.data["pool"], dict):
            raise source.error("pool", "the protocol has no [pool] section")
        return parse_pool(source.data["pool"], source.error, name=Path(path).stem,
                          declared=source.data.get("algorithms", []),
                          folder=source.path.parent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str = "pool",
                  where: str = "<pool spec>") -> PoolSpec:
        """A spec from ``to_dict`` output (e.g. a pool file's metadata), validated."""
        pool = {key: value for key, value in data.items() if key != "declared"}
        return parse_pool(pool, lambda dotted, message: ProtocolError(where, None, dotted,
                                                                       message), name=name,
                          declared=data.get("declared", []))

    def to_dict(self) -> dict[str, Any]:
        """The spec in the shape of the ``[pool]`` section, with every range spelled out."""
        data: dict[str, Any] = {
            "teams": self.teams, "seed": self.seed, "humans": self.humans,
            "kits": list(self.kits), "algorithms": list(self.algorithms),
            "most_capable_reading": self.most_capable_reading,
            "sample": {"c": _nested_lists(self.sample_c), "p": _nested_lists(self.sample_p)},
            "accept": self.accept.to_dict(), "teammate": self.teammate.to_dict(),
        }
        if self.fea is not None:
            data["fea"] = self.fea.to_dict()
        if self.declared:  # absent without them, so the presets' digests stay
            data["declared"] = [declared_dict(algorithm) for algorithm in self.declared]
        return data

    def digest(self) -> str:
        """A hash of everything that decides the pool file's content."""
        return _hash({"format": POOL_FORMAT, "spec": self.to_dict()})

    def teams_digest(self) -> str:
        """A hash of what decides the teams' coefficients alone (not the algorithms, FEA
        bounds or teammate filter), so derived bounds can name the teams they came from."""
        data = self.to_dict()
        keys = ["teams", "seed", "humans", "kits", "sample", "accept"]
        if self.accept.team_types is not None:
            keys.append("most_capable_reading")
        return _hash({"format": POOL_FORMAT, **{key: data[key] for key in keys}})

    def stale_bounds(self) -> str | None:
        """Why the FEA bounds are not those of the pool this spec builds: their
        ``bounds_source`` cites no teams digest, or another one. None when they are, when
        the protocol fixes them on purpose (``bounds_fixed``), or without FEA."""
        if self.fea is None or self.fea.fixed:
            return None
        built = self.teams_digest()[:16]
        cited = CITED_TEAMS.findall(self.fea.source)
        if cited and all(built.startswith(digest[:16]) for digest in cited):
            return None
        came_from = (f"cites teams digest {', '.join(cited)}" if cited
                     else "cites no teams digest")
        return (f"{came_from}, but this spec's pool has teams digest {built}: the bounds "
                f"are not this pool's. Derive them from it (`study pool build`, then `study "
                f"pool bounds`), or set bounds_fixed = true if they are fixed on purpose")

    def with_changes(self, teams: int | None = None, seed: int | None = None) -> PoolSpec:
        """The same spec with another size or seed (e.g. a CI-sized run)."""
        if teams is not None and teams < 1:
            raise InvalidInput("teams", teams, "must be a positive whole number")
        if seed is not None and seed < 0:
            raise InvalidInput("seed", seed, "must be a non-negative whole number")
        return replace(self, teams=self.teams if teams is None else teams,
                       seed=self.seed if seed is None else seed)


def _hash(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def interval_arrays(intervals: Intervals) -> tuple[np.ndarray, np.ndarray]:
    """``lo, hi`` arrays ``[h, n]`` of per-human, per-type intervals."""
    import numpy as np

    array = np.array(intervals, dtype=float)
    return array[..., 0], array[..., 1]


def _nested_lists(intervals: Intervals) -> list[list[list[float]]]:
    return [[list(pair) for pair in row] for row in intervals]


def _compact(intervals: Intervals) -> str:
    rows = {tuple(row) for row in intervals}
    row = intervals[0] if len(rows) == 1 else None
    if row is not None and len(set(row)) == 1:
        return "[{:g}, {:g}]".format(*row[0])
    return json.dumps(_nested_lists(intervals) if row is None else [list(x) for x in row])


# --- parsing -----------------------------------------------------------------------------


def parse_pool(data: Mapping[str, Any], error: ErrorFactory, name: str = "pool",
               declared: object = (), folder: Path | None = None) -> PoolSpec:
    """Validate a ``[pool]`` mapping; ``error(field, message)`` builds the exception.
    ``declared``: the protocol's ``[[algorithms]]`` tables (``folder``: the protocol's,
    where a goal reward given as code may sit), solved when ``algorithms`` names them."""
    _check_keys(data, _POOL_KEYS, "pool", error)
    if "teams" not in data:
        raise error("pool.teams", "missing: how many teams the pool holds")
    if "seed" not in data:
        raise error("pool.seed", "missing: the random seed that makes the pool reproducible")
    teams = _whole(data["teams"], "pool.teams", 1, error)
    seed = _whole(data["seed"], "pool.seed", 0, error)
    humans = _whole(data.get("humans", 2), "pool.humans", 2, error)
    kits = _kits(data.get("kits", [8, 8]), humans, error)
    tables = _declared_tables(declared, error)
    algorithms = _algorithms(data.get("algorithms", [*ALGORITHMS, *tables]), tables, error)
    chosen = tuple(_declared_algorithm(tables[name], error, folder) for name in algorithms
                   if name in tables)
    reading = data.get("most_capable_reading", COMPARATIVE_ADVANTAGE)
    if reading not in MOST_CAPABLE_READINGS:
        raise error("pool.most_capable_reading",
                    f"{reading!r}: expected one of {', '.join(MOST_CAPABLE_READINGS)}")
    shape = (humans, len(kits))
    sample = _table(data, "sample", _SAMPLE_KEYS, error)
    sample_c = _intervals(sample.get("c", list(DEFAULT_RANGE)), "pool.sample.c", shape, error)
    sample_p = _intervals(sample.get("p", list(DEFAULT_RANGE)), "pool.sample.p", shape, error)
    _check_capabilities_can_be_positive(sample_c, error)
    accept = _criteria(_table(data, "accept", _CRITERIA_KEYS, error), "pool.accept", shape,
                       error)
    _check_overlap(sample_c, accept.c, "c", error)
    _check_overlap(sample_p, accept.p, "p", error)
    teammate = _teammate(_table(data, "teammate", (*_CRITERIA_KEYS, "role", "rule", "unplaced"),
                                error), shape, error)
    for section, criteria in (("accept", accept), ("teammate", teammate.criteria)):
        if criteria.needs_fair_gap and not {"efficient", "fair"} <= set(algorithms):
            raise error(f"pool.{section}.fair_gap_above",
                        "the fair gap needs both 'efficient' and 'fair' in pool.algorithms")
    fea = _fea(data, "fea" in algorithms, error)
    for algorithm in chosen:
        if algorithm.uses_bounds and algorithm.fea_bounds is None and fea is None:
            raise error("pool.algorithms", f"{algorithm.id!r} takes the bounds of [pool.fea] "
                                           "(fea_bounds = \"pool\"), which needs 'fea' in "
                                           "pool.algorithms")
    return PoolSpec(teams, seed, humans, kits, algorithms, sample_c, sample_p, accept, fea,
                    teammate, name, reading, chosen)


def _check_keys(data: Mapping[str, Any], allowed: tuple[str, ...], where: str,
                error: ErrorFactory) -> None:
    for key in data:
        if key not in allowed:
            raise error(f"{where}.{key}", f"unknown key; expected one of {', '.join(allowed)}")


def _table(data: Mapping[str, Any], key: str, allowed: tuple[str, ...],
           error: ErrorFactory) -> Mapping[str, Any]:
    table = data.get(key, {})
    if not isinstance(table, Mapping):
        raise error(f"pool.{key}", f"must be a table ([pool.{key}])")
    _check_keys(table, allowed, f"pool.{key}", error)
    return table


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(value: object, where: str, least: int, error: ErrorFactory) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise error(where, f"{value!r}: must be a whole number of at least {least}")
    return value


def _number(value: object, where: str, lo: float, hi: float, error: ErrorFactory) -> float:
    if not _is_number(value) or not math.isfinite(value) or not lo <= value <= hi:  # type: ignore[arg-type]
        raise error(where, f"{value!r}: must be a number within [{lo:g}, {hi:g}]")
    return float(value)  # type: ignore[arg-type]


def _kits(value: object, humans: int, error: ErrorFactory) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(k, int) and not isinstance(k, bool)
                                              for k in value):
        raise error("pool.kits", f"{value!r}: must be a list of whole numbers, one per task type")
    try:
        kits = validate_kits(value, humans)
    except InvalidInput as problem:
        raise error("pool.kits", str(problem)) from None
    if len(kits) < 2:
        raise error("pool.kits", "a pool needs at least 2 task types")
    return kits


def _algorithms(value: object, declared: Mapping[str, Any],
                error: ErrorFactory) -> tuple[str, ...]:
    """The presets in their order, then the declared algorithms in the order listed."""
    known = [*ALGORITHMS, *declared]
    if not isinstance(value, list) or not value:
        raise error("pool.algorithms", f"must be a non-empty list drawn from {known}")
    for name in value:
        if name not in known:
            raise error("pool.algorithms", f"{name!r}: unknown; expected {', '.join(known)} "
                                           "(a preset or an [[algorithms]] id)")
    if len(set(value)) != len(value):
        raise error("pool.algorithms", "lists an algorithm twice")
    return (*(name for name in ALGORITHMS if name in value),
            *(name for name in value if name not in ALGORITHMS))


def _declared_tables(declared: object, error: ErrorFactory) -> dict[str, Mapping[str, Any]]:
    """The ``[[algorithms]]`` tables by id (checked in full by ``study check``; here as far
    as solving them needs)."""
    if not isinstance(declared, list):
        raise error("algorithms", "must be a list of [[algorithms]] tables")
    tables: dict[str, Mapping[str, Any]] = {}
    for index, table in enumerate(declared):
        if not isinstance(table, Mapping) or not isinstance(table.get("id"), str):
            raise error(f"algorithms.{index}", "an [[algorithms]] table needs an id")
        if table["id"] in ALGORITHMS or table["id"] in tables:
            raise error(f"algorithms.{index}.id", f"{table['id']!r}: a preset's or a repeated "
                                                  "id")
        tables[table["id"]] = {**table, "_index": index}
    return tables


def _declared_algorithm(table: Mapping[str, Any], error: ErrorFactory,
                        folder: Path | None) -> DeclaredAlgorithm:
    """One ``[[algorithms]]`` table as the pool solves it; a goal reward given as code
    carries its file's digest (recorded, or found from ``folder``)."""
    where = f"algorithms.{table['_index']}"
    terms, python = table.get("terms"), table.get("python")
    if (terms is None) == (python is None):
        raise error(where, "needs terms or python (one of the two)")
    if terms is not None:
        problems = terms_problems(terms)
        if problems:
            term, message = problems[0]
            raise error(f"{where}.terms" + (f".{term}" if term else ""), message)
    bounds = table.get("fea_bounds")
    if bounds == "pool":
        bounds = None
    elif bounds is not None:
        if not isinstance(bounds, list) or len(bounds) != 2 or not all(map(_is_number, bounds)):
            raise error(f"{where}.fea_bounds", f"{bounds!r}: must be \"pool\" or [lo, hi]")
        bounds = (float(bounds[0]), float(bounds[1]))
    memory = table.get("memory")
    if memory is not None and memory not in MEMORY_SCOPES:
        raise error(f"{where}.memory", f"{memory!r}: expected one of {', '.join(MEMORY_SCOPES)}")
    digest = table.get("python_sha256")
    if python is not None and digest is None and folder is not None:
        from study.allocation.algorithms import code_sha256

        digest = code_sha256(python, folder)
    return DeclaredAlgorithm(
        table["id"], tuple((str(k), float(v)) for k, v in (terms or {}).items()), bounds,
        memory is not None, python, None if folder is None else str(folder), digest)


def declared_dict(algorithm: DeclaredAlgorithm) -> dict[str, Any]:
    """A declared algorithm in its ``[[algorithms]]`` shape, as a pool's spec records it."""
    data: dict[str, Any] = {"id": algorithm.id}
    if algorithm.python is not None:
        data["python"] = algorithm.python
        data["python_sha256"] = algorithm.python_sha256
    else:
        data["terms"] = dict(algorithm.terms)
    if algorithm.uses_bounds:
        data["fea_bounds"] = ("pool" if algorithm.fea_bounds is None
                              else list(algorithm.fea_bounds))
    if algorithm.memory:
        data["memory"] = "study"
    return data


def _interval(value: object, where: str, error: ErrorFactory) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2 or not all(map(_is_number, value)):
        raise error(where, f"{value!r}: an interval is written [lo, hi]")
    lo, hi = (_number(v, where, 0.0, 1.0, error) for v in value)
    if lo > hi:
        raise error(where, f"[{lo:g}, {hi:g}]: lo is greater than hi")
    return lo, hi


def _intervals(value: object, where: str, shape: tuple[int, int],
               error: ErrorFactory) -> Intervals:
    """``[lo, hi]`` for every coefficient, one ``[lo, hi]`` per task type, or one list of
    those per human; returned spelled out as ``[h][n]`` pairs."""
    humans, types = shape
    depth = _depth(value)
    if depth == 1:
        pair = _interval(value, where, error)
        return tuple(tuple(pair for _ in range(types)) for _ in range(humans))
    if depth == 2:
        rows = _per_type(value, where, types, error)
        return tuple(rows for _ in range(humans))
    if depth == 3 and isinstance(value, list):
        if len(value) != humans:
            raise error(where, f"has {len(value)} rows; one per human ({humans}) expected")
        return tuple(_per_type(row, f"{where}[{i}]", types, error)
                     for i, row in enumerate(value))
    raise error(where, "expected [lo, hi], a list of them per task type, or such lists "
                       "per human")


def _depth(value: object) -> int:
    depth = 0
    while isinstance(value, list) and value:
        depth, value = depth + 1, value[0]
    return depth


def _per_type(value: object, where: str, types: int,
              error: ErrorFactory) -> tuple[tuple[float, float], ...]:
    if not isinstance(value, list) or len(value) != types:
        raise error(where, f"needs one [lo, hi] per task type ({types})")
    return tuple(_interval(pair, f"{where}[{j}]", error) for j, pair in enumerate(value))


def _check_capabilities_can_be_positive(sample_c: Intervals, error: ErrorFactory) -> None:
    for human, row in enumerate(sample_c):
        if sum(hi for _, hi in row) <= 0:
            raise error("pool.sample.c", f"every capability of human {human} would be 0; "
                                         "a human's capabilities must sum to more than 0")


def _check_overlap(sample: Intervals, accepted: Intervals | None, name: str,
                   error: ErrorFactory) -> None:
    """Refuse an acceptance interval that no sampled value can meet."""
    if accepted is None:
        return
    for i, (drawn_row, kept_row) in enumerate(zip(sample, accepted, strict=True)):
        for j, (drawn, kept) in enumerate(zip(drawn_row, kept_row, strict=True)):
            if kept[1] < drawn[0] or kept[0] > drawn[1]:
                raise error(f"pool.accept.{name}",
                            f"human {i}, type {j}: [{kept[0]:g}, {kept[1]:g}] does not meet "
                            f"the sampled range [{drawn[0]:g}, {drawn[1]:g}]")


def _criteria(table: Mapping[str, Any], where: str, shape: tuple[int, int],
              error: ErrorFactory) -> Criteria:
    c = _intervals(table["c"], f"{where}.c", shape, error) if "c" in table else None
    p = _intervals(table["p"], f"{where}.p", shape, error) if "p" in table else None
    team_types = None
    if "team_types" in table:
        team_types = _team_types(table["team_types"], f"{where}.team_types", error)
    gap = None
    if "fair_gap_above" in table:
        gap = _number(table["fair_gap_above"], f"{where}.fair_gap_above", -1.0, 1.0, error)
    return Criteria(c, p, team_types, gap)


def _team_types(value: object, where: str, error: ErrorFactory) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise error(where, f"must be a non-empty list drawn from {', '.join(TEAM_TYPES)}")
    for name in value:
        if name not in TEAM_TYPES:
            raise error(where, f"{name!r}: unknown team type; expected {', '.join(TEAM_TYPES)}")
    if len(set(value)) != len(value):
        raise error(where, "lists a team type twice")
    return tuple(value)


def _teammate(table: Mapping[str, Any], shape: tuple[int, int],
              error: ErrorFactory) -> TeammateFilter:
    choices = {"role": ("any", ROLES), "rule": ("typed", TEAMMATE_RULES),
               "unplaced": ("unmatched", UNPLACED)}
    values = {}
    for key, (default, allowed) in choices.items():
        values[key] = table.get(key, default)
        if values[key] not in allowed:
            raise error(f"pool.teammate.{key}",
                        f"{values[key]!r}: expected one of {', '.join(allowed)}")
    chosen = {key: value for key, value in values.items() if value != choices[key][0]}
    if shape[0] != 2 and (chosen or set(table) - set(choices)):
        raise error("pool.teammate", "teammate matching is defined for two-human teams (a "
                                     "[team]'s agent seats are matched to its people)")
    criteria = _criteria({k: v for k, v in table.items() if k not in choices},
                         "pool.teammate", shape, error)
    return TeammateFilter(criteria, **values)


def _fea(data: Mapping[str, Any], wanted: bool, error: ErrorFactory) -> FeaSettings | None:
    table = _table(data, "fea", _FEA_KEYS, error)
    if not wanted:
        if table:
            raise error("pool.fea", "FEA settings given but 'fea' is not in pool.algorithms")
        return None
    w = _number(table.get("w", 0.70), "pool.fea.w", 0.0, 1.0, error)
    bounds = table.get("bounds")
    if bounds is None:
        raise error("pool.fea.bounds", "missing: FEA needs [lo, hi] to scale |FE| "
                                       "(derive them with `study pool bounds POOL`)")
    if not isinstance(bounds, list) or len(bounds) != 2 or not all(map(_is_number, bounds)):
        raise error("pool.fea.bounds", f"{bounds!r}: must be [lo, hi]")
    lo, hi = (_number(v, "pool.fea.bounds", 0.0, math.inf, error) for v in bounds)
    if hi <= lo:
        raise error("pool.fea.bounds", f"[{lo:g}, {hi:g}]: hi must be greater than lo")
    source = table.get("bounds_source")
    if not isinstance(source, str) or not source.strip():
        raise error("pool.fea.bounds_source", "missing: say where the bounds came from "
                                              "(e.g. the `study pool bounds` command)")
    fixed = table.get("bounds_fixed", False)
    if not isinstance(fixed, bool):
        raise error("pool.fea.bounds_fixed", f"{fixed!r}: must be true or false")
    return FeaSettings(w, lo, hi, source.strip(), fixed)
