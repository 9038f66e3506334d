"""Team pools: simulated teams solved once, read for the paper's tables, matched live.

The web app's interface::

    spec = PoolSpec.from_protocol("protocols/study1.toml")
    pool = Pool.load(ensure_pool(spec, directory))
    match = pool.match(c, p)
"""

from study.pool.build import build_pool, ensure_pool
from study.pool.match import Match, NoEligibleTeam
from study.pool.spec import Criteria, PoolSpec, TeammateFilter
from study.pool.store import Pool

__all__ = ["Criteria", "Match", "NoEligibleTeam", "Pool", "PoolSpec", "TeammateFilter",
           "build_pool", "ensure_pool"]
