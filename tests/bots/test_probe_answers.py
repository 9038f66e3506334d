"""Bots answer round probes from their declared response model (study/bots/probe_answers.py):
the answer rises with the share of preferred rounds so far, and some probes are missed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.analysis import run_bots
from support.protocols import three_with_probes

from study.bots import profile_for
from study.bots.probe_answers import KitsSeen, ProbeAnswers

BOTS = 10


def test_the_model_rises_with_the_preferred_share_and_misses_at_its_rate():
    model = ProbeAnswers(miss_rate=0.2)
    rng = np.random.default_rng(5)
    low = [model.answer(0.0, 7, rng) for _ in range(2000)]
    high = [model.answer(1.0, 7, rng) for _ in range(2000)]
    answered = [v for v in low + high if v is not None]
    assert set(answered) <= set(range(1, 8))
    assert np.mean([v is None for v in low + high]) == pytest.approx(0.2, abs=0.03)
    mean_low = np.mean([v for v in low if v is not None])
    mean_high = np.mean([v for v in high if v is not None])
    # the planted slope: 0.7 of the scale's 6 steps from share 0 to share 1
    assert mean_high - mean_low == pytest.approx(0.7 * 6, abs=0.3)


def test_the_preferred_share_counts_a_resumed_round_once():
    kits = KitsSeen((0.2, 0.8))  # letters preferred
    assert kits.preferred_share(1) == 0.5
    kits.saw(1, 10, 1)
    kits.saw(1, 10, 1)
    kits.saw(1, 11, 0)
    assert kits.preferred_share(1) == 0.5
    kits.saw(1, 12, 1)
    assert kits.preferred_share(1) == pytest.approx(2 / 3)
    assert kits.preferred_share(2) == 0.5


def _preferred_share(storage, row) -> float:
    """The share of the session's rounds up to the probe's that gave the participant the
    kit type they rated higher, from the stored rounds."""
    measured = [m["value"] for m in storage.all(
        "SELECT value FROM measurements WHERE participant_id = ? AND kind = 'preference' "
        "ORDER BY task_type", (row["participant_id"],))]
    kits = [r["task_type"] for r in storage.all(
        "SELECT task_type FROM rounds WHERE session_id = ? AND number <= ?",
        (row["session_id"], row["round_number"]))]
    return float(np.mean([kit == int(np.argmax(measured)) for kit in kits]))


@pytest.mark.minutes(0.5)
def test_bots_answer_probes_from_their_model_and_miss_some(tmp_path):
    profiles = [replace(profile_for(index, "fast", 3), probes=ProbeAnswers(miss_rate=0.15))
                for index in range(BOTS)]
    journey, steps = run_bots(tmp_path, profiles, three_with_probes(tmp_path))
    assert steps == ["done"] * BOTS
    journey.tick(journey.clock() + 60.0)  # the last probes' deadlines pass
    storage = journey.storage
    probes = storage.all("SELECT * FROM probes ORDER BY id")
    assert len(probes) == BOTS * 3 * 2  # every collaborative round of every bot
    missed = [row for row in probes if row["missed"]]
    assert 0 < len(missed) < 0.4 * len(probes)
    assert all(row["value"] is None and row["answered_at"] is None for row in missed)
    answered = [row for row in probes if not row["missed"]]
    assert all(1 <= row["value"] <= 7 and row["answered_at"] <= row["deadline"]
               for row in answered)
    shares = np.array([_preferred_share(storage, row) for row in answered])
    values = np.array([row["value"] for row in answered])
    assert np.corrcoef(shares, values)[0, 1] > 0.5


def test_a_bot_that_never_misses_answers_every_probe(tmp_path):
    profiles = [replace(profile_for(0, "fast", 4), probes=ProbeAnswers(miss_rate=0.0))]
    journey, _ = run_bots(tmp_path, profiles, three_with_probes(tmp_path))
    journey.tick(journey.clock() + 60.0)
    assert [row["missed"] for row in journey.storage.all("SELECT missed FROM probes")] == [0] * 6
