"""A protocol's algorithms as the model's ``Algorithm``: presets by name, ``[[algorithms]]``
tables (weighted terms or a goal reward given as code), and FEA's bounds where a protocol
takes them from.

Reading a protocol needs no numpy (``study.protocol.loader``); a command that solves imports
this module, and ``study check`` only to try a goal reward given as code in a child process
(``study.allocation.trial``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from functools import lru_cache
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from types import ModuleType
from typing import Any

from study.allocation.model import (
    ALGORITHMS,
    Algorithm,
    GoalRewardCode,
    GoalRewardFunction,
    InvalidInput,
)
from study.allocation.terms import DeclaredAlgorithm


def import_goal_reward(source: str, folder: Path | None = None) -> GoalRewardFunction:
    """The function ``module:function`` names, from the Python path or else from
    ``folder`` (the protocol's), so a lab's module can sit beside its protocol."""
    module_name, _, function_name = source.partition(":")
    module = _import(source, module_name, folder)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise InvalidInput("python", source, f"module {module_name} has no function "
                                             f"{function_name}")
    return function


def _import(source: str, module_name: str, folder: Path | None) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        top = module_name.split(".")[0]
        if folder is None or error.name != top:
            raise InvalidInput("python", source, f"cannot be imported: {error}") from None
    except Exception as error:  # the lab's module failed while importing
        raise InvalidInput("python", source, f"cannot be imported: {type(error).__name__}: "
                                             f"{error}") from None
    sys.path.append(str(folder))
    try:
        return importlib.import_module(module_name)
    except Exception as error:  # not found beside the protocol either, or failed there
        raise InvalidInput("python", source, f"cannot be imported from the Python path or "
                                             f"{folder}: {type(error).__name__}: {error}"
                           ) from None
    finally:
        sys.path.remove(str(folder))


def goal_reward_code(source: str, folder: Path | None = None) -> GoalRewardCode:
    return GoalRewardCode(source, import_goal_reward(source, folder))


def module_file(source: str, folder: Path | str | None = None) -> Path | None:
    """The file of a goal reward's module, found without running it (on the Python path,
    else beside the protocol); None when neither has it."""
    module_name = source.partition(":")[0]
    found = _spec_without_running(module_name)
    if found is not None and found.origin and Path(found.origin).is_file():
        return Path(found.origin)
    if folder is None:
        return None
    base = Path(folder).joinpath(*module_name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _spec_without_running(module_name: str) -> ModuleSpec | None:
    """Where a module is, its packages searched but not imported: ``find_spec`` of
    ``pkg.module`` would run ``pkg/__init__.py``, the lab's code, in this process."""
    top, *rest = module_name.split(".")
    try:
        found = importlib.util.find_spec(top)
        for depth in range(1, len(rest) + 1):
            if found is None or found.submodule_search_locations is None:
                return None
            found = PathFinder.find_spec(".".join([top, *rest[:depth]]),
                                         list(found.submodule_search_locations))
    except (ImportError, ValueError):
        return None
    return found


def code_sha256(source: str, folder: Path | str | None = None) -> str | None:
    """SHA-256 of the file a goal reward given as code lives in: what a pool's digest and a
    session's record name, so other code is never taken for this one."""
    path = module_file(source, folder)
    return None if path is None else hashlib.sha256(path.read_bytes()).hexdigest()


def declared_algorithm(declared: DeclaredAlgorithm,
                       pool_bounds: tuple[float, float] | None = None,
                       folder: Path | str | None = None) -> Algorithm:
    """The model's algorithm of an ``[[algorithms]]`` table; its fair_equity term scaled by
    its own bounds, or by the pool's (``fea_bounds = "pool"``). Worked out once per table
    and bounds: the live study asks for it at every placement."""
    where = folder if folder is not None else declared.folder
    return _declared_algorithm(declared, pool_bounds, None if where is None else str(where))


@lru_cache(maxsize=256)
def _declared_algorithm(declared: DeclaredAlgorithm, pool_bounds: tuple[float, float] | None,
                        folder: str | None) -> Algorithm:
    bounds = (declared.fea_bounds or pool_bounds) if declared.uses_bounds else (0.0, 1.0)
    if bounds is None:
        raise ValueError(f"algorithm {declared.id}: its fair_equity term takes the pool's "
                         "bounds and the pool has none; give fea_bounds = [lo, hi]")
    lo, hi = bounds
    code = None if declared.python is None else goal_reward_code(
        declared.python, None if folder is None else Path(folder))
    return Algorithm(declared.id, lo=lo, hi=hi, terms=declared.terms, memory=declared.memory,
                     code=code)


def declaration(algorithm: Algorithm) -> dict[str, Any]:
    """An algorithm as data: what a session row, an export's metadata and a simulation
    study record of it (its terms and weights, bounds where a term uses them, memory, and
    the code it runs with its file's digest). ``from_declaration`` reads it back."""
    code = algorithm.code
    return {
        "id": algorithm.name,
        "preset": algorithm.name in ALGORITHMS,
        "terms": None if code is not None else dict(algorithm.terms),
        "fea_bounds": [algorithm.lo, algorithm.hi] if algorithm.uses_bounds else None,
        "memory": "study" if algorithm.memory else None,
        "python": None if code is None else code.source,
        "python_sha256": None if code is None else _function_sha256(code),
    }


def _function_sha256(code: GoalRewardCode) -> str | None:
    module = sys.modules.get(getattr(code.function, "__module__", "") or "")
    path = getattr(module, "__file__", None)
    if path is None or not Path(path).is_file():
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def from_declaration(data: dict[str, Any], folder: Path | str | None = None) -> Algorithm:
    """The algorithm a ``declaration`` describes (a stored session solved again)."""
    bounds = data.get("fea_bounds") or (0.0, 1.0)
    if data.get("preset"):
        if data["id"] != "fea":
            return Algorithm(data["id"])
        return Algorithm("fea", w=data["terms"]["efficiency"], lo=bounds[0], hi=bounds[1])
    declared = DeclaredAlgorithm(
        data["id"], tuple((data.get("terms") or {}).items()), tuple(bounds),  # type: ignore[arg-type]
        data.get("memory") == "study", data.get("python"))
    return declared_algorithm(declared, folder=folder)
