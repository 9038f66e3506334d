"""A bot pilot is people the protocol could place: bots drawn as the protocol's people,
rating the themes so that they measure their own preferences under every theme rule."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from support.analysis import run_bots

from study.bots import StudyFacts, profile_for
from study.bots.participant import rating_of, theme_ratings
from study.cli import main
from study.protocol.loader import load_protocol

PROTOCOLS = Path(__file__).resolve().parents[2] / "protocols"
BOTS = 30


def test_themes_on_no_cookie_are_rated_with_the_bots_preferences_from_the_highest():
    """Themes by rating: the page names no cookie, the rule puts the higher-rated theme on
    its preferred type, so the two themes carry the bot's two preferences, highest first."""
    themes = [{"id": "ravens"}, {"id": "steelers"}]
    assert theme_ratings((0.2, 0.9), themes, 7) == {"ravens": rating_of(0.9, 7),
                                                    "steelers": rating_of(0.2, 7)}
    placed = [{"id": "ravens", "cookie": "letters"}, {"id": "steelers", "cookie": "squares"}]
    assert theme_ratings((0.2, 0.9), placed, 7) == {"ravens": rating_of(0.9, 7),
                                                    "steelers": rating_of(0.2, 7)}
    extra = [*themes, {"id": "third"}]
    assert theme_ratings((0.2, 0.9), extra, 7)["third"] == 4


def test_the_protocols_people_are_drawn_inside_its_ranges():
    facts = StudyFacts.from_protocol(load_protocol(PROTOCOLS / "study2.toml"))
    assert facts.capability_ranges == ((0.20, 0.32), (0.63, 1.00))
    drawn = np.array([profile_for(i, "fast", 3, facts.capability_ranges).capabilities
                      for i in range(200)])
    assert (drawn[:, 0] >= 0.20).all() and (drawn[:, 0] <= 0.32).all()
    assert (drawn[:, 1] >= 0.63).all() and (drawn[:, 1] <= 0.95).all()


def test_the_protocols_people_need_the_protocol(capsys):
    assert main(["bot", "http://127.0.0.1:9", "--participants", "1"]) == 2
    err = capsys.readouterr().err
    assert "--protocol" in err and "--people uniform" in err


@pytest.mark.minutes(0.5)
@pytest.mark.parametrize("name", ["study1", "study2", "welfare"])
def test_a_bot_pilot_places_its_bots_with_preferences_as_varied_as_drawn(name, tmp_path):
    """Thirty bots of the protocol's people through practice to the team: at least 90 %
    placed with a teammate, their measured preferences those drawn (in the order the theme
    rule places them), not the middle of the scale, and no practice round of theirs taken
    for no person's."""
    protocol_path = PROTOCOLS / f"{name}.toml"
    facts = StudyFacts.from_protocol(load_protocol(protocol_path))
    profiles = [replace(profile_for(index, "fast", 11, facts.capability_ranges),
                        stop_at="teammate") for index in range(BOTS)]
    journey, steps = run_bots(tmp_path, profiles, protocol_path)
    drawn = [sorted(profile.preferences) for profile in profiles]
    placed = steps.count("teammate")
    assert placed >= 0.9 * BOTS, f"{name}: {placed} of {BOTS} placed ({steps})"
    measured = [sorted(row["value"] for row in journey.storage.all(
        "SELECT value FROM measurements WHERE participant_id = ? AND kind = 'preference'",
        (journey.storage.participant(code)["id"],)))
        for code in [row["code"] for row in journey.storage.all(
            "SELECT code FROM participants ORDER BY id")]]
    assert np.array(measured) == pytest.approx(np.array(drawn), abs=0.09)
    assert np.std(np.array(measured)[:, 1]) > 0.1, "preferences as varied as drawn"
    flagged = journey.storage.all("SELECT implausible FROM measurements WHERE "
                                  "implausible IS NOT NULL")
    assert flagged == [], "the bots report elements as a page does, at a person's speed"
