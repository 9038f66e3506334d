"""The load benchmark's table (``benchmarks.load``)."""

from __future__ import annotations

import numpy as np

from benchmarks.load import DEMO, HEADER, Config, Row
from study.bots.light import Tally


def test_a_row_fills_every_column_of_the_table_with_the_write_lock_held():
    row = Row(Config("human", DEMO, 2, 1000, "normal"), np.array([3.0, 14.0, 27.0]), 1300,
              np.array([5.0, 35.0]), 1400, 790.0, 0.87, 0.4, 0.2, 0.6, 2.0, 0, 0, Tally(),
              lock_wait_share=0.12, lock_held_share=0.5)
    cells = row.markdown().split(" | ")
    assert len(row.markdown().split("|")) == len(HEADER.splitlines()[0].split("|"))
    held = HEADER.splitlines()[0].split(" | ").index("write lock held")
    assert cells[held] == "50%"
    assert "held by the workers together 50.0% of the window" in row.details()
