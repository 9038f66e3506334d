"""``analysis simulate`` gives each algorithm's goal on the paper's capability scale: the
share of the simulated teams where it is the goal the algorithm reaches on the protocol's
scale, and FEA's weight there (MODEL.md, "The capability scale is part of the
algorithm")."""

from __future__ import annotations

import numpy as np
import pytest
from support.protocols import study2_at

from analysis import algorithm_study
from study.people.scale import protocol_scale
from study.pool import Pool, build_pool
from study.pool.placing import algorithm_for
from study.pool.scale import same_goal_shares
from study.protocol.loader import load_protocol


@pytest.mark.parametrize(("squares", "letters", "paper_w"), [(1.15, 0.244, 0.40),
                                                             (0.3285, 0.0697, 0.70)])
def test_the_simulation_study_reads_every_algorithm_on_the_papers_scale(tmp_path, squares,
                                                                        letters, paper_w):
    protocol = load_protocol(study2_at(tmp_path, squares, letters, teams=2000))
    pool = Pool.open(build_pool(protocol.pool_spec(), tmp_path / "pool.parquet",
                                progress=False, workers=1))
    study = algorithm_study.run(pool, protocol, progress=lambda message: None)
    table = study.tables["paper_scale"].set_index("robot")
    assert list(table.index) == ["efficient", "fea"]
    assert (table["teams"] == 2000).all()
    assert table.loc["fea", "weight"] == 0.7
    assert table.loc["fea", "paper_weight"] == pytest.approx(paper_w, abs=0.005)
    assert np.isnan(table.loc["efficient", "paper_weight"])
    c, p = pool.coefficients
    scale = protocol_scale(protocol)
    fea = algorithm_for(protocol.conditions[1], pool.fea_bounds)
    (expected,) = same_goal_shares(c, p, [("fea", fea)], protocol.kits, scale)
    assert table.loc["fea", "share"] == expected.share
    assert (table.loc["fea", "share"] >= 0.99) == (not scale.off)
    printed = algorithm_study.format_study(study)
    assert f"capability scale: {scale.describe()}" in printed
    assert algorithm_study.TABLE_TITLES["paper_scale"] in printed
