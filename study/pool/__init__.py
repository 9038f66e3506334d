"""Team pools: simulated teams solved once, read for the paper's tables, matched live.

The web app's interface::

    spec = PoolSpec.from_protocol("protocols/study1.toml")
    pool = Pool.load(ensure_pool(spec, directory))
    match = pool.match(c, p)

The names are imported on first use, so a light module of the package (``teamtypes``)
does not bring in Parquet or the k-d tree. The ``[pool]`` section itself, ``PoolSpec``, is
the protocol's (``study.protocol.pool_spec``), re-exported here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from study.pool.build import build_pool, ensure_pool
    from study.pool.match import Match, NoEligibleTeam
    from study.pool.store import Pool
    from study.protocol.pool_spec import Criteria, PoolSpec, TeammateFilter

SPEC = "study.protocol.pool_spec"
_HOMES = {"build_pool": "study.pool.build", "ensure_pool": "study.pool.build",
          "Match": "study.pool.match", "NoEligibleTeam": "study.pool.match",
          "Criteria": SPEC, "PoolSpec": SPEC, "TeammateFilter": SPEC, "Pool": "study.pool.store"}

__all__ = ["Criteria", "Match", "NoEligibleTeam", "Pool", "PoolSpec", "TeammateFilter",
           "build_pool", "ensure_pool"]


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
