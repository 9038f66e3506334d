"""``study calibrate``: from a pilot of simulated people to a protocol that measures people
like them inside the target ranges, and every refusal (docs/pilot-to-study.md).

Pilots run simulated people (``study.people.speed``) through the real journey code
(``tests/support/human_journeys.py``) on study2-paper (the paper's ranges), with a small pool of its
teams; new people are then measured under the calibrated protocol the same way.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from support.human_journeys import PROTOCOLS, HumanJourneys
from support.web import FakeClock, make_app

from study.calibration.pilot import (
    MIN_PARTICIPANTS,
    pool_target,
    reference_speed,
    target_source,
    whole_scale,
)
from study.cli import main
from study.people.scale import PAPER_RANGES, protocol_scale
from study.people.speed import DESKTOP, Human, Layout
from study.pool import Pool, PoolSpec, ensure_pool
from study.pool.bounds import derive_bounds
from study.protocol.loader import load_protocol
from study.task.cookies import letters_target
from study.web.console.holds import apply_action, ensure_tables
from study.web.participant.agent_pool import PoolTeammates

STUDY2 = PROTOCOLS / "study2-paper.toml"
TARGETS = ((0.20, 0.32), (0.63, 1.00))  # the paper's ranges ([pool.sample] c): squares, letters
# The protocol's own themes on both cookies ("BR" squares, "GO STEELERS" letters).
RATINGS = {"ravens": 6, "steelers": 2}
PILOT, NEW = 8, 30
# Seconds a letter and a box: far faster than the model, and slower (the paces).
PACES = {"fast": (0.7, 0.28), "slow": (2.5, 0.7)}
_steady = Human(spread=0.0)
_rng = np.random.default_rng(0)
MODEL_LETTER = _steady.letter_seconds(len(letters_target("GO STEELERS")["tray"]), _rng)
MODEL_BOX = _steady.click_seconds(DESKTOP.box_pitch, DESKTOP.box, _rng)


@dataclass(frozen=True)
class Paced(Human):
    """A person of the model whose letters take ``letters`` times the model's time (boxes,
    take-in and corrections take ``pace`` times)."""

    letters: float = 1.0

    def letter_seconds(self, tiles: int, rng: np.random.Generator,
                       layout: Layout = DESKTOP) -> float:
        return super().letter_seconds(tiles, rng, layout) * self.letters / self.pace


def at_pace(letter_seconds: float, box_seconds: float) -> Paced:
    return Paced(pace=box_seconds / MODEL_BOX, letters=letter_seconds / MODEL_LETTER)


@pytest.fixture(scope="module")
def teammates(tmp_path_factory: pytest.TempPathFactory) -> PoolTeammates:
    spec = PoolSpec.from_protocol(STUDY2).with_changes(teams=3000)
    path = ensure_pool(spec, tmp_path_factory.mktemp("pools"), progress=False)
    return PoolTeammates(Pool.load(path), str(path))


def journeys(protocol: Path, directory: Path, teammates: PoolTeammates) -> HumanJourneys:
    directory.mkdir(parents=True)
    return HumanJourneys(protocol, directory, directory, teammates)


def play(run: HumanJourneys, human: Human, people: int, seed: int) -> np.ndarray:
    """``[people, types]`` capabilities measured for ``people`` at the human's pace."""
    rng = np.random.default_rng(seed)
    return np.array([run.person(f"seed{seed}-{k:03d}", human, rng, RATINGS).capabilities
                     for k in range(people)])


@pytest.fixture(scope="module")
def pilots(tmp_path_factory: pytest.TempPathFactory, teammates) -> dict[str, HumanJourneys]:
    """One pilot of study2 per pace, ``PILOT`` people each."""
    base = tmp_path_factory.mktemp("pilots")
    runs = {}
    for name, pace in PACES.items():
        runs[name] = journeys(STUDY2, base / name, teammates)
        play(runs[name], at_pace(*pace), PILOT, seed=1)
    return runs


def calibrate(capsys, pilot: HumanJourneys | Path, out: Path, *options: str,
              protocol: Path = STUDY2) -> tuple[int, str]:
    """Run ``study calibrate``; its exit code and what it printed (errors included)."""
    database = pilot if isinstance(pilot, Path) else pilot.storage.path
    code = main(["calibrate", str(database), "--protocol", str(protocol), "--out", str(out),
                 *options])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def inside(values: np.ndarray) -> np.ndarray:
    """Per person: every capability inside its target range and unclipped."""
    ok = (values > 0.01) & (values < 0.99)
    for j, (lo, hi) in enumerate(TARGETS):
        ok[:, j] &= (values[:, j] >= lo) & (values[:, j] <= hi)
    return ok.all(axis=1)


# --- the loop -------------------------------------------------------------------------


@pytest.mark.parametrize("pace", list(PACES))
def test_people_at_a_pace_far_from_the_model_measure_inside_the_ranges_once_calibrated(
        tmp_path, capsys, teammates, pilots, pace):
    pilot = pilots[pace]
    before = pilot.storage.all("SELECT value FROM measurements WHERE kind = 'capability'")
    assert np.mean(inside(np.array([r["value"] for r in before]).reshape(-1, 2))) < 0.5, (
        "the model's reference speeds measure these people outside the ranges")
    code, printed = calibrate(capsys, pilot, tmp_path / "calibrated.toml")
    assert code == 0, printed
    new = play(journeys(tmp_path / "calibrated.toml", tmp_path / "new", teammates),
               at_pace(*PACES[pace]), NEW, seed=2)
    assert np.mean(inside(new)) >= 0.9, new


def test_the_rule_centres_the_typical_person_and_clips_nobody():
    speeds = np.exp(np.random.default_rng(3).normal(np.log(0.1), 0.1, 40))
    reference = reference_speed(speeds, (0.20, 0.32))
    assert math.exp(np.log(speeds).mean()) / reference == pytest.approx(math.sqrt(0.064),
                                                                         rel=1e-3)
    # letters' range reaches the clip bound: the fastest pilot participant is kept at 0.98
    wide = np.exp(np.random.default_rng(4).normal(np.log(0.1), 0.2, 40))
    reference = reference_speed(wide, (0.63, 1.00))
    assert wide.max() / reference == pytest.approx(0.98, rel=1e-3)
    assert reference == float(f"{reference:.4g}")


def test_the_typical_person_at_the_geometric_centre_keeps_the_headroom():
    """On study2's wide ranges the typical pilot participant lands at sqrt(lo * hi), and
    people 0.3 and 2.5 times the typical person's times measure inside the range; at the
    arithmetic middle (0.46 of letters' [0.04, 0.88]) the quick ones would clip at 0.99."""
    typical = np.exp(np.random.default_rng(5).normal(np.log(0.06), 0.05, 40))
    lo, hi = 0.04, 0.88
    reference = reference_speed(typical, (lo, hi))
    centre = math.exp(np.log(typical).mean()) / reference
    assert centre == pytest.approx(math.sqrt(lo * hi), rel=1e-3)
    quickest, slowest = centre / 0.3, centre / 2.5
    assert lo < slowest < quickest < min(hi, 0.99)


def test_the_table_says_what_changed_and_the_block_records_the_pilot(tmp_path, capsys,
                                                                      pilots):
    pilot = pilots["fast"]
    code, printed = calibrate(capsys, pilot, tmp_path / "calibrated.toml")
    assert code == 0, printed
    lines = printed.splitlines()
    assert lines[0].startswith("pilot study2-paper.sqlite (sha256 ")
    assert f": {PILOT} participants measured 2025-06-15 to 2025-06-15" in lines[0]
    assert lines[1].split() == ["type", "target", "reference", "median", "c", "clipped",
                                "inside", "target"]
    letters = " ".join(lines[3].split())
    assert letters.startswith("letters [0.63, 1] 0.07 -> ")
    assert " 0.99 -> 0.8" in letters and f" {PILOT} -> 0 " in letters, "all clipped before"
    assert letters.endswith(f" 0 -> {PILOT} of {PILOT}"), "a clipped value is never inside"
    block = tomllib.loads((tmp_path / "calibrated.toml").read_text())["calibration"]
    assert block["participants"] == PILOT and len(block["pilot_sha256"]) == 64
    assert block["first"] == block["last"] == "2025-06-15"
    assert "geometric mean" in block["rule"] and "[pool.sample] c" in block["rule"]
    new = load_protocol(tmp_path / "calibrated.toml")
    assert block["changes"] == [
        f"cookies.{cookie.name}.reference_speed: {old.reference_speed!r} -> "
        f"{cookie.reference_speed!r}" for cookie, old in zip(
            new.cookies, load_protocol(STUDY2).cookies, strict=True)]
    assert calibrate(capsys, pilot, tmp_path / "again.toml")[0] == 0
    assert tomllib.loads((tmp_path / "again.toml").read_text())["calibration"][
        "pilot_sha256"] == block["pilot_sha256"], "the same pilot, the same digest"


def test_the_file_keeps_its_comments_and_only_the_calibrated_values_change(
        tmp_path, capsys, pilots):
    code, printed = calibrate(capsys, pilots["slow"], tmp_path / "calibrated.toml",
                              "--ranges", "--fea-bounds", "people", "--percentiles", "5,95")
    assert code == 0, printed
    old = STUDY2.read_text().splitlines()
    new = (tmp_path / "calibrated.toml").read_text().splitlines()
    body = new[:new.index("[calibration]") - 1]
    # bounds from people are not the pool's: the protocol says they are fixed on purpose
    added = body.index("bounds_fixed = true")
    assert body[added - 1].startswith("[pool.fea]")
    body = body[:added] + body[added + 1:]
    changed = [(a, b) for a, b in zip(old, body, strict=True) if a != b]
    assert [a.split("=")[0].strip() for a, _ in changed] == [
        "reference_speed", "reference_speed", "c", "bounds", "bounds_source"]
    assert changed[2][1].endswith("# per task type: squares, letters"), "comment kept"
    calibrated = load_protocol(tmp_path / "calibrated.toml")
    spec = calibrated.pool_spec()
    references = [cookie.reference_speed for cookie in calibrated.cookies]
    pilot = pilots["slow"].storage.all("SELECT task_type, speed FROM measurements "
                                       "WHERE kind = 'capability' ORDER BY task_type")
    for j in range(2):
        values = [row["speed"] / references[j] for row in pilot if row["task_type"] == j]
        lo, hi = spec.sample_c[0][j]
        assert lo <= min(values) and max(values) <= hi and hi - max(values) < 0.01
    assert spec.fea is not None and 0 <= spec.fea.lo < spec.fea.hi
    assert spec.fea.source.startswith("percentiles 5 and 95 of |FE| over ")
    assert "pilot study2-paper.sqlite" in spec.fea.source


def test_the_calibrated_protocol_passes_study_check_and_serves(tmp_path, capsys, pilots,
                                                               teammates):
    code, printed = calibrate(capsys, pilots["fast"], tmp_path / "calibrated.toml",
                              "--ranges", "--fea-bounds", "people")
    assert code == 0, printed
    assert main(["check", str(tmp_path / "calibrated.toml")]) == 0
    assert "valid protocol 'study2-paper'" in capsys.readouterr().out
    app = make_app(tmp_path, teammates, FakeClock(), protocol=tmp_path / "calibrated.toml")
    study = app.extensions["study"]
    study.enrol("served-1")
    page = app.test_client().get("/p/served-1")
    assert page.status_code == 200 and "The Fair Bakery" in page.get_data(as_text=True)
    calibrated = load_protocol(tmp_path / "calibrated.toml")
    assert study.protocol.cookies == calibrated.cookies


# --- the FEA bounds -----------------------------------------------------------------------


def test_new_ranges_come_with_the_bounds_of_the_pool_they_build(tmp_path, capsys, pilots):
    """New sampling ranges make a new pool: its bounds, by the old source's rule (min and
    max), with its digest, exactly what ``study pool bounds`` derives from the built pool."""
    code, printed = calibrate(capsys, pilots["fast"], tmp_path / "calibrated.toml", "--ranges")
    assert code == 0, printed
    spec = load_protocol(tmp_path / "calibrated.toml").pool_spec()
    old = load_protocol(STUDY2).pool_spec()
    assert spec.teams_digest() != old.teams_digest(), "the ranges changed the teams"
    built = derive_bounds(ensure_pool(spec, tmp_path / "pools", progress=False))
    assert (spec.fea.lo, spec.fea.hi) == (built.lo, built.hi) != (old.fea.lo, old.fea.hi)
    assert f"teams digest {spec.teams_digest()[:16]}" in spec.fea.source
    assert spec.fea.source.startswith("min and max of |FE| over 900,000 goal states")
    assert not spec.fea.fixed and spec.stale_bounds() is None
    assert "pool.fea.bounds: " in printed and "pool.fea.bounds_source: " in printed
    assert main(["check", str(tmp_path / "calibrated.toml")]) == 0


def test_bounds_fixed_on_purpose_are_kept(tmp_path, capsys, pilots):
    fixed = tmp_path / "fixed.toml"
    fixed.write_text(STUDY2.read_text().replace("[pool.fea]", "[pool.fea]\nbounds_fixed = "
                                                "true", 1))
    code, printed = calibrate(capsys, pilots["fast"], tmp_path / "calibrated.toml", "--ranges",
                              protocol=fixed)
    assert code == 0, printed
    assert "pool.fea.bounds: kept (bounds_fixed = true)" in printed
    kept, old = (load_protocol(path).pool_spec().fea for path in (tmp_path / "calibrated.toml",
                                                                  fixed))
    assert kept == old


def goal_allocations(kits: tuple[int, int]) -> list[np.ndarray]:
    """Every end of a session of two humans, enumerated here by hand: human 0 holds
    ``a`` squares and ``R - a`` letters."""
    rounds = sum(kits) // 2
    return [np.array([[a, rounds - a], [kits[0] - a, kits[1] - rounds + a]])
            for a in range(max(0, rounds - kits[1]), min(kits[0], rounds) + 1)]


def test_people_bounds_come_from_a_pilot_nobody_was_matched_in(tmp_path, capsys):
    """The shipped study2 places none of these people (quick at boxes, slow at letters:
    squares is their best cookie, and their preferred theme goes on it); calibrated with
    --fea-bounds people, their live teams are formed offline in the calibrated protocol's
    pool, in its target team, and the bounds come from those teams' goal states."""
    from study.calibration.bounds import pilot_live_teams
    from study.calibration.pilot import read_pilot
    from study.pool.bounds import spec_bounds
    from study.pool.teamtypes import most_capable_human, team_type_codes

    shipped = PROTOCOLS / "study2.toml"
    spec = PoolSpec.from_protocol(shipped).with_changes(teams=3000)
    path = ensure_pool(spec, tmp_path / "pools", progress=False)
    run = journeys(shipped, tmp_path / "pilot", PoolTeammates(Pool.load(path), str(path)))
    people = [run.person(f"unplaced-{k}", at_pace(3.5, 0.15), np.random.default_rng(k),
                         RATINGS) for k in range(6)]
    assert {person.step for person in people} == {"unmatched"}, "nobody was matched"
    out = tmp_path / "calibrated.toml"
    code, printed = calibrate(capsys, run, out, "--ranges", "--fea-bounds", "people",
                              protocol=shipped)
    assert code == 0, printed
    calibrated = load_protocol(out)
    fea = calibrated.pool_spec().fea
    assert fea.fixed and "of the live teams of 6 pilot participants, formed offline" in \
        fea.source
    assert "FEA bounds from the live teams of 6 of 6 pilot participants" in printed
    assert main(["check", str(out)]) == 0
    # the teams: each pilot participant, as re-measured, in the target team of the new pool
    pilot = read_pilot(run.storage.path, calibrated)
    pool = spec_bounds(calibrated.pool_spec())  # FEA's scale while the teams are formed
    teams, unplaced = pilot_live_teams(calibrated, pilot, replace(
        fea, lo=pool.lo, hi=pool.hi, source=pool.source, fixed=False))
    assert len(teams) == 6 and unplaced == {}
    references = np.array([cookie.reference_speed for cookie in calibrated.cookies])
    c = np.stack([team.c for team in teams])
    p = np.stack([team.p for team in teams])
    measured = np.clip(pilot.speeds / references, 0.01, 0.99)
    human = [int(np.flatnonzero((team_c == row).all(axis=1))[0])
             for team_c, row in zip(c, measured, strict=True)]
    assert list(team_type_codes(c, p)) == [0] * 6, "every live team is Mixed"
    assert list(most_capable_human(c)) == human, "with the participant the most capable"
    # |FE| = |O_0 / I_0 - O_1 / I_1|, outcomes sum(p T), inputs sum(c), at every goal
    values = [abs((team.p[0] @ goal[0]) / team.c[0].sum() - (team.p[1] @ goal[1])
                  / team.c[1].sum()) for team in teams for goal in goal_allocations(
                      calibrated.kits)]
    assert (fea.lo, fea.hi) == pytest.approx((min(values), max(values)), rel=1e-12)


# --- who counts -------------------------------------------------------------------------


def test_withdrawn_aborted_and_excluded_participants_are_left_out(tmp_path, capsys,
                                                                  teammates):
    run = journeys(STUDY2, tmp_path / "pilot", teammates)
    play(run, at_pace(*PACES["fast"]), 8, seed=4)
    ensure_tables(run.storage)
    people = run.storage.all("SELECT * FROM participants ORDER BY id")
    assert run.send(people[0]["code"], "withdraw", {})["ok"]
    for person in people[1:3]:
        apply_action(run.storage, person, "abort", "", None, run.clock())
    apply_action(run.storage, people[3], "flag", "", None, run.clock())  # not a study2 rule
    run.storage.write("UPDATE rounds SET close_reason = 'recovery' WHERE participant_id = ? "
                      "AND number = 2", (people[4]["id"],))
    code, printed = calibrate(capsys, run, tmp_path / "calibrated.toml")
    assert code == 2
    assert printed.count("\n") == 1 and "4 participant(s) with a completed, measured " \
        "practice (left out: 2 aborted, 1 recovered-capability, 1 withdrawn)" in printed
    assert f"needs at least {MIN_PARTICIPANTS}" in printed
    code, printed = calibrate(capsys, run, tmp_path / "calibrated.toml",
                              "--min-participants", "4")
    assert code == 0, printed
    assert tomllib.loads((tmp_path / "calibrated.toml").read_text())["calibration"][
        "participants"] == 4


# --- refusals ---------------------------------------------------------------------------


def test_too_few_participants_are_refused(tmp_path, capsys, pilots):
    code, printed = calibrate(capsys, pilots["fast"], tmp_path / "out.toml",
                              "--min-participants", str(PILOT + 1))
    assert code == 2 and printed.count("\n") == 1
    assert f"{PILOT} participant(s) with a completed, measured practice" in printed
    assert f"needs at least {PILOT + 1}" in printed
    assert not (tmp_path / "out.toml").exists()


def test_a_database_of_another_protocol_is_refused(tmp_path, capsys, pilots):
    code, printed = calibrate(capsys, pilots["fast"], tmp_path / "out.toml",
                              protocol=PROTOCOLS / "study1.toml")
    assert code == 2 and printed.count("\n") == 1
    assert "holds participants of protocol 'study2-paper', not 'study1'" in printed


def test_a_database_without_measured_rounds_is_refused(tmp_path, capsys, teammates):
    run = journeys(STUDY2, tmp_path / "pilot", teammates)
    for code in ("early-1", "early-2"):
        run.journey.enrol(code)
        run.submit(code, "consent", {"agree": True})
    code, printed = calibrate(capsys, run, tmp_path / "out.toml")
    assert code == 2 and printed.count("\n") == 1
    assert "holds no measured practice rounds" in printed
    code, printed = calibrate(capsys, tmp_path / "missing.sqlite", tmp_path / "out.toml")
    assert code == 2 and "no such file" in printed
    (tmp_path / "notes.sqlite").write_text("not a database")
    code, printed = calibrate(capsys, tmp_path / "notes.sqlite", tmp_path / "out.toml")
    assert code == 2 and "is not an SQLite database" in printed


@pytest.mark.parametrize("target, says", [
    ("squares=0.25,0.26", "cannot be met: the pilot's middle half measured "),
    ("letters=0.995,1", "cannot be met: capabilities are measured within [0.01, 0.99]"),
    ("squares=0.3,0.2", "cannot be met: need 0 <= LO < HI <= 1"),
    ("cherries=0.2,0.3", "TYPE one of squares, letters"),
])
def test_targets_that_cannot_be_met_are_refused(tmp_path, capsys, pilots, target, says):
    code, printed = calibrate(capsys, pilots["slow"], tmp_path / "out.toml", "--target",
                              target)
    assert code == 2 and printed.count("\n") == 1
    assert says in printed, printed


def test_a_narrow_target_is_refused_with_the_figures(tmp_path, capsys, pilots):
    printed = calibrate(capsys, pilots["slow"], tmp_path / "out.toml", "--target",
                        "squares=0.25,0.26")[1]
    speeds = np.array([row["speed"] for row in pilots["slow"].storage.all(
        "SELECT speed FROM measurements WHERE kind = 'capability' AND task_type = 0")])
    low, high = np.percentile(speeds, [25, 75])
    assert f"{low:.4g}-{high:.4g} cookies/s (a ratio of {high / low:.2f}" in printed
    assert "the range allows a ratio of 1.04" in printed and f"of {PILOT} pilot" in printed


def test_a_target_met_by_a_narrow_enough_range_is_accepted(tmp_path, capsys, pilots):
    code, printed = calibrate(capsys, pilots["fast"], tmp_path / "out.toml", "--target",
                              "squares=0.4,0.6", "--target", "letters=0.3,0.5")
    assert code == 0, printed
    block = tomllib.loads((tmp_path / "out.toml").read_text())["calibration"]
    assert "targets squares [0.4, 0.6], letters [0.3, 0.5] (--target)" in block["rule"]


@pytest.mark.parametrize("options, says", [
    (["--percentiles", "5,95"], "needs --fea-bounds people"),
    (["--min-participants", "1"], "a spread needs at least 2"),
])
def test_inconsistent_options_are_refused(tmp_path, capsys, pilots, options, says):
    code, printed = calibrate(capsys, pilots["fast"], tmp_path / "out.toml", *options)
    assert code == 2 and says in printed


def test_the_protocol_itself_is_never_overwritten(tmp_path, capsys, pilots):
    copy = tmp_path / "study2-paper.toml"
    copy.write_text(STUDY2.read_text())
    code, printed = calibrate(capsys, pilots["fast"], copy, protocol=copy)
    assert code == 2 and "is the protocol itself" in printed
    assert copy.read_text() == STUDY2.read_text()


def test_recalibrating_replaces_the_calibration_block(tmp_path, capsys, pilots):
    first, second = tmp_path / "first.toml", tmp_path / "second.toml"
    assert calibrate(capsys, pilots["fast"], first)[0] == 0
    code, printed = calibrate(capsys, pilots["slow"], second, protocol=first)
    assert code == 0, printed
    text = second.read_text()
    assert text.count("[calibration]") == 1
    changes = tomllib.loads(text)["calibration"]["changes"]
    old = load_protocol(first).cookies[0].reference_speed
    assert changes[0].startswith(f"cookies.squares.reference_speed: {old!r} -> ")
    assert json.dumps(changes)


# --- the report -------------------------------------------------------------------------


def test_the_report_shows_the_measures_against_the_ranges_and_their_provenance(
        tmp_path, capsys, pilots):
    from analysis.calibration import section
    from analysis.load import load

    data = load(pilots["fast"].storage.path)
    part = section(data, STUDY2, tmp_path / "figures")
    assert part is not None and (tmp_path / "figures" / "calibration.png").is_file()
    table = part["tables"][0][1].set_index("type")
    assert table.loc["letters", "clipped_high"] == PILOT, "people this fast clip on letters"
    assert (table.loc["letters", "target_lo"], table.loc["letters", "target_hi"]) == TARGETS[1]
    assert table.loc["letters", "reference_speed"] == "0.07"
    assert "model defaults" in part["text"]
    off = table.loc["squares", "clipped_or_outside"]
    assert [w.split(":")[0] for w in part["warnings"]] == [
        *(["squares"] if off > 0.1 * PILOT else []), "letters"]
    assert calibrate(capsys, pilots["fast"], tmp_path / "calibrated.toml")[0] == 0
    part = section(data, tmp_path / "calibrated.toml", tmp_path / "figures")
    assert "calibrated by `study calibrate` from the pilot study2-paper.sqlite" in part["text"]
    changes = part["tables"][1][1]
    assert list(changes["value"]) == ["cookies.squares.reference_speed",
                                      "cookies.letters.reference_speed"]


def test_values_are_replaced_where_they_are_written_or_added_under_their_table():
    from study.calibration.pilot import set_value

    text = '[pool]\nteams = 10   # few\n\n# the teammate\n[pool.teammate]\nrole = "any"\n'
    added = set_value(text, "pool.sample.c", "[0.2, 0.3]")
    assert added == ('[pool]\nteams = 10   # few\n\n[pool.sample]\nc = [0.2, 0.3]\n\n'
                     '# the teammate\n[pool.teammate]\nrole = "any"\n')
    assert set_value(added, "pool.sample.p", "[0.1, 0.9]").count("[pool.sample]\np = ") == 1
    replaced = set_value(text, "pool.teams", "20")
    assert replaced.splitlines()[1] == "teams = 20   # few"
    spread = '[pool.sample]\nc = [\n  [0.2, 0.3],  # squares\n  [0.6, 1.0],\n]  # per type\n'
    assert set_value(spread, "pool.sample.c", "[[0.1, 0.2]]") == (
        "[pool.sample]\nc = [[0.1, 0.2]]  # per type\n")
    quoted = '[pool.fea]\nbounds_source = "a # b \\" c"  # note\n'
    assert set_value(quoted, "pool.fea.bounds_source", '"new"') == (
        '[pool.fea]\nbounds_source = "new"  # note\n')


@pytest.mark.parametrize("path", sorted(PROTOCOLS.glob("*.toml")), ids=lambda path: path.stem)
def test_calibration_keeps_every_shipped_protocol_on_the_papers_scale(path):
    """A pilot's typical person goes to the centres of the target ranges, and for every
    shipped protocol those are the paper's: its pool's ranges, or the paper's where the
    pool samples the whole scale (study1, the demo), which says nothing of where people
    measure."""
    protocol = load_protocol(path)
    assert tuple(pool_target(protocol, j) for j in range(2)) == PAPER_RANGES
    whole = all(whole_scale(protocol, j) for j in range(2))
    assert target_source(protocol) == ("the paper's ranges: the pool samples the whole scale"
                                       if whole else "[pool.sample] c")


def test_a_pool_of_its_own_ranges_is_its_protocols_target(tmp_path):
    text = (PROTOCOLS / "study2.toml").read_text(encoding="utf-8")
    path = tmp_path / "study2.toml"
    path.write_text(text.replace("c = [[0.20, 0.32], [0.63, 1.00]]",
                                 "c = [[0.10, 0.40], [0.50, 0.90]]"), encoding="utf-8")
    protocol = load_protocol(path)
    assert [pool_target(protocol, j) for j in range(2)] == [(0.10, 0.40), (0.50, 0.90)]


def test_a_calibrated_protocol_is_on_its_pilots_scale(tmp_path, capsys, pilots):
    """After a pilot, people fix the scale, not the model: the [calibration] block records
    the pilot's typical capability per type, and `study check` sets that beside the paper's
    centres, with no warning when the pilot's people sit at them."""
    code, printed = calibrate(capsys, pilots["fast"], tmp_path / "calibrated.toml")
    assert code == 0, printed
    protocol = load_protocol(tmp_path / "calibrated.toml")
    people, typical = protocol.calibrated
    block = tomllib.loads((tmp_path / "calibrated.toml").read_text())["calibration"]
    assert people == PILOT and list(typical) == block["typical"]
    assert typical == pytest.approx(np.sqrt(np.prod(TARGETS, axis=1)), rel=0.1)
    scale = protocol_scale(protocol)
    assert scale.typical == typical and not scale.off
    assert scale.describe().startswith(f"the pilot's typical person ({PILOT} people) measures")
    assert main(["check", str(tmp_path / "calibrated.toml")]) == 0
    out = capsys.readouterr().out
    assert "the pilot's typical person" in out and "WARNING" not in out
