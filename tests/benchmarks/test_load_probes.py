"""The load benchmark's round probes comparison (``benchmarks.load --without-probes``): the
light bots answer probes as a page does, and the same study runs without them beside it.
No figure is checked here: the ratio is the benchmark's to give, on a quiet machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.load import has_probes, main, without_probes
from study.bots.servers import quick_protocol

pytestmark = pytest.mark.slow
DEMO = Path("protocols/demo.toml")


def test_a_protocol_without_probes_keeps_everything_else():
    text = DEMO.read_text(encoding="utf-8")
    stripped = without_probes(text)
    assert "\n[[probes]]" in text and "\n[[probes]]" not in stripped
    assert "[recruitment]" in stripped and "[analysis]" in stripped


@pytest.mark.minutes(3)
def test_both_runs_complete_and_the_light_bots_answer_or_miss_every_probe(tmp_path,
                                                                          monkeypatch):
    # short rounds and a probe after every one, so a few people meet probes within a minute
    quick = quick_protocol(DEMO, tmp_path / "quick.toml", round_seconds=3.0,
                           practice_seconds=2.0)
    quick.write_text(quick.read_text(encoding="utf-8").replace('after = "every 2"',
                                                               'after = "every"'),
                     encoding="utf-8")
    assert has_probes(quick)
    turns = []
    monkeypatch.setattr("benchmarks.load.report", lambda rounds, _: turns.extend(rounds))
    assert main(["--protocol", str(quick), "--workers", "1", "--participants", "3",
                 "--durability", "normal", "--fast-workers", "", "--ramp", "1",
                 "--settle", "40", "--steady", "35", "--without-probes"]) == 0
    [rows] = turns
    probes, none = rows
    assert probes.config.probes and not none.config.probes
    for row in rows:
        assert row.messages_per_second > 0 and not row.tally.errors and row.missing == 0
    bots = probes.tally
    assert bots.probes_shown > 0 and bots.probes_answered > 0
    assert bots.probes_answered + bots.probes_missed <= bots.probes_shown  # some cut off at the end
    assert sum(probes.probes) > 0  # due in the window, as the server recorded them
    assert none.tally.probes_shown == 0 and none.probes == (0, 0, 0)
