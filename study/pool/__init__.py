"""Team pools: simulated teams solved once, read for the paper's tables, matched live.

The web app's interface::

    spec = PoolSpec.from_protocol("protocols/study1.toml")
    pool = Pool.load(ensure_pool(spec, directory))
    match = pool.match(c, p)

The names are imported on first use, so a light module of the package (``spec``,
``teamtypes``) does not bring in Parquet or the k-d tree.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from study.pool.build import build_pool, ensure_pool
    from study.pool.match import Match, NoEligibleTeam
    from study.pool.spec import Criteria, PoolSpec, TeammateFilter
    from study.pool.store import Pool

_HOMES = {"build_pool": "build", "ensure_pool": "build", "Match": "match",
          "NoEligibleTeam": "match", "Criteria": "spec", "PoolSpec": "spec",
          "TeammateFilter": "spec", "Pool": "store"}

__all__ = ["Criteria", "Match", "NoEligibleTeam", "Pool", "PoolSpec", "TeammateFilter",
           "build_pool", "ensure_pool"]


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"study.pool.{_HOMES[name]}"), name)
