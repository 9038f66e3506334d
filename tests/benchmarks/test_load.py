"""The load benchmark's table (``benchmarks.load``)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from benchmarks.floor import HEADER as FLOOR_HEADER
from benchmarks.floor import FloorRow
from benchmarks.load import (
    DEMO,
    HEADER,
    Config,
    Row,
    against_first_study,
    against_one_worker,
    floor_key,
    main,
    matrix,
    over_rounds,
    protocol_file,
    ratios,
    report,
    run_rounds,
)
from study.bots.light import Tally

TEAMS3 = Path("protocols/teams3.toml")


def test_a_row_fills_every_column_of_the_table_with_the_write_lock_held():
    row = Row(Config("human", DEMO, 2, 1000, "normal"), np.array([3.0, 14.0, 27.0]), 1300,
              np.array([5.0, 35.0]), 1400, 790.0, 0.87, 0.4, 0.2, 0.6, 2.0, 0, 0, Tally(),
              lock_wait_share=0.12, lock_held_share=0.5)
    cells = row.markdown().split(" | ")
    assert len(row.markdown().split("|")) == len(HEADER.splitlines()[0].split("|"))
    held = HEADER.splitlines()[0].split(" | ").index("write lock held")
    assert cells[held] == "50%"
    assert "held by the workers together 50.0% of the window" in row.details()
    assert "resident" not in row.details()  # not sampled


def test_a_row_under_full_durability_gives_the_logs_syncs_and_normal_none():
    figures = (np.array([3.0, 14.0, 27.0]), 1300, np.array([5.0, 35.0]), 1400, 790.0, 0.87,
               0.4, 0.2, 0.6, 2.0, 0, 0, Tally())
    full = Row(Config("human", DEMO, 1, 1000, "full"), *figures, syncs_per_message=0.25,
               sync_ms=0.312)
    assert "syncs of the log 0.25 a message, 0.31 ms each on average, " in full.details()
    normal = Row(Config("human", DEMO, 1, 1000, "normal"), *figures, syncs_per_message=0.0)
    assert "syncs" not in normal.details()


def test_a_row_of_several_workers_says_how_evenly_they_shared_the_work():
    figures = (np.array([3.0, 14.0, 27.0]), 1300, np.array([5.0, 35.0]), 1400, 1090.0, 0.9,
               0.4, 0.2, 0.6, 2.0, 0, 0, Tally())
    two = Row(Config("human", TEAMS3, 2, 1000, "normal"), *figures, busiest_worker=1.083)
    assert ", the busiest worker 1.08 times the workers' mean CPU, " in two.details()
    one = Row(Config("human", TEAMS3, 1, 1000, "normal"), *figures, busiest_worker=1.0)
    assert "busiest" not in one.details()
    assert "busiest" not in Row(Config("human", TEAMS3, 2, 1000, "normal"),
                                *figures).details()  # not sampled


def test_a_row_gives_each_programs_largest_process_memory():
    row = Row(Config("human", TEAMS3, 2, 1000, "normal"), np.array([3.0, 14.0, 27.0]), 1300,
              np.array([5.0, 35.0]), 1400, 1090.0, 0.9, 0.4, 0.2, 0.6, 2.0, 0, 0, Tally(),
              memory_mb={"haproxy": 12.4, "python": 258.3, "redis-server": 9.0})
    assert row.details().endswith("resident at the window's end (the largest process of "
                                  "each): python 258 MB, haproxy 12 MB, redis-server 9 MB")


def test_the_same_load_adds_one_worker_at_each_workers_share_before_it_once():
    args = argparse.Namespace(backup_every=[0.0], durability=["normal"], workers=[1, 2, 4],
                              participants=[500, 1000], protocol=[TEAMS3], same_load=True,
                              fast_workers=[], fast_participants=[])
    human = [(c.workers, c.participants) for c in matrix(args)]
    # 1 at 500 runs anyway; 1 at 250 (for 2 at 500 and 4 at 1000) and 1 at 125 are added
    assert human == [(1, 500), (1, 1000), (1, 250), (2, 500), (2, 1000), (1, 125), (4, 500),
                     (4, 1000)]
    assert len(matrix(argparse.Namespace(**{**vars(args), "same_load": False}))) == 6


def _row(workers: int, participants: int, cpu_ms: float, workers_ms: float,
         ack_p95: float, study: Path = TEAMS3, durability: str = "normal") -> Row:
    return Row(Config("human", study, workers, participants, durability),
               np.array([5.0, ack_p95, 40.0]), 2900, np.array([10.0, 40.0]), 1750,
               1093.0, cpu_ms, 0.4, 0.2, 0.6, 2.0, 0, 0, Tally(),
               cpu_ms_by_program={"python": workers_ms, "haproxy": cpu_ms - workers_ms})


def test_two_workers_are_given_over_one_at_the_same_people_and_the_same_people_a_worker():
    rows = [_row(1, 500, 0.70, 0.70, 9), _row(1, 1000, 0.56, 0.56, 13),
            _row(2, 1000, 0.80, 0.70, 21)]
    lines = against_one_worker(rows, {})
    assert lines == [
        "teams3, normal, 1000: 2 workers over 1, CPU a message 1.43 (the workers alone "
        "1.25); ack p95 21 against 13 ms",
        "teams3, normal, 1000: 2 workers over 1 at 500 (the same people a worker), CPU a "
        "message 1.14 (the workers alone 1.00); ack p95 21 against 9 ms"]
    assert against_one_worker(rows[1:], {}) == lines[:1]


def test_a_study_over_the_first_shows_the_p95s_its_ratio_is_of():
    rows = [_row(1, 1000, 0.56, 0.56, 7.64, DEMO), _row(1, 1000, 0.55, 0.55, 12.53)]
    assert against_first_study(rows) == [
        "teams3 over demo, 1 worker(s), 1000: ack p95 12.5 / 7.6 ms = 1.64"]


def _round(demo_p95: float, teams_p95: float, two_workers_cpu: float) -> list[Row]:
    return [_row(1, 1000, 0.60, 0.60, demo_p95, DEMO), _row(1, 1000, 0.60, 0.60, teams_p95),
            _row(2, 1000, two_workers_cpu, two_workers_cpu, teams_p95 / 2),
            _row(1, 1000, 0.60, 0.60, teams_p95 * 1.5, durability="full")]


def test_the_criteria_ratios_pair_rows_of_one_round():
    found = ratios(_round(10.0, 20.0, 0.66))
    assert found == {
        "teams3 over demo, normal, 1 worker(s), 1000: ack p95": 2.0,
        "teams3, normal, 1000: 2 workers over 1: CPU a message": pytest.approx(1.1),
        "teams3, normal, 1000: 2 workers over 1: ack p95": 0.5,
        "teams3, 1 worker(s), 1000: full over normal durability: ack p95": 1.5}


def test_over_rounds_gives_every_rounds_ratio_and_their_median():
    lines = over_rounds([_round(10.0, 20.0, 0.66), _round(10.0, 12.0, 0.90),
                         _round(8.0, 12.0, 0.72)])
    assert lines[0] == "teams3 over demo, normal, 1 worker(s), 1000: ack p95: 2.00, 1.20, " \
                       "1.50; median 1.50"
    assert lines[1] == "teams3, normal, 1000: 2 workers over 1: CPU a message: 1.10, 1.50, " \
                       "1.20; median 1.20"
    assert over_rounds([_round(10.0, 20.0, 0.66)])[0].endswith("ack p95: 2.00")


def test_a_report_of_rounds_gives_each_rounds_table_and_the_ratios_over_them(capsys):
    report([_round(10.0, 20.0, 0.66), _round(8.0, 12.0, 0.72)], [{}, {}])
    out = capsys.readouterr().out
    assert out.index("round 1 of 2") < out.index("round 2 of 2") < out.index(
        "the criteria's ratios, round by round")
    assert out.count(HEADER) == 2
    assert "teams3 over demo, normal, 1 worker(s), 1000: ack p95: 2.00, 1.50; median 1.75" in out


def test_even_rounds_run_the_matrix_backwards_and_keep_its_order(monkeypatch, tmp_path):
    """A machine that slows through a run counts against the late rows in one round and
    the early ones in the next; each round's table still reads in the matrix's order."""
    args = argparse.Namespace(backup_every=[0.0], durability=["normal", "full"],
                              workers=[1, 2], participants=[1000], protocol=[DEMO],
                              same_load=False, fast_workers=[], fast_participants=[],
                              repeat=2, floor=False)
    ran: list[Config] = []

    def run_config(config: Config, *_: object) -> Row:
        ran.append(config)
        return Row(config, np.array([3.0, 14.0, 27.0]), 1300, np.array([5.0, 35.0]), 1400,
                   790.0, 0.87, 0.4, 0.2, 0.6, 2.0, 0, 0, Tally())

    monkeypatch.setattr("benchmarks.load.run_config", run_config)
    turns, floors = run_rounds(args, tmp_path)
    assert floors == [{}, {}]
    order = [(c.durability, c.workers) for c in ran]
    forwards = [("normal", 1), ("normal", 2), ("full", 1), ("full", 2)]
    assert order == forwards + forwards[::-1]
    assert [[(r.config.durability, r.config.workers) for r in rows] for rows in turns] == [
        forwards, forwards]


def test_each_rows_floor_runs_right_after_it_and_is_reported_with_its_round(
        monkeypatch, tmp_path, capsys):
    """The machine's speed moves within minutes: a row's floor is measured beside it, in
    every round, and each round's ratios are over that round's floors."""
    args = argparse.Namespace(backup_every=[0.0], durability=["normal"], workers=[1, 2],
                              participants=[1000], protocol=[DEMO], same_load=False,
                              fast_workers=[], fast_participants=[], repeat=2, floor=True)
    ran: list[tuple[str, int]] = []

    def run_config(config: Config, *_: object) -> Row:
        ran.append(("study", config.workers))
        return _row(config.workers, 1000, 0.5 * config.workers, 0.5 * config.workers, 14.0,
                    DEMO)

    def floor_like(row: Row, *_: object) -> FloorRow:
        ran.append(("floor", row.config.workers))
        return FloorRow("normal", row.config.workers, 1000, np.array([1.0, 3.0, 9.0]), 1300,
                        790.0, 0.40 if row.config.workers == 1 else 0.48, mix="demo")

    monkeypatch.setattr("benchmarks.load.run_config", run_config)
    monkeypatch.setattr("benchmarks.load.floor_like", floor_like)
    turns, floors = run_rounds(args, tmp_path)
    assert ran == [("study", 1), ("floor", 1), ("study", 2), ("floor", 2),
                   ("study", 2), ("floor", 2), ("study", 1), ("floor", 1)]
    assert [sorted(found) for found in floors] == [sorted(floor_key(r) for r in rows)
                                                   for rows in turns]
    report(turns, floors)
    out = capsys.readouterr().out
    assert out.count(FLOOR_HEADER) == 2
    assert out.count("the floor's 1.20") == 2, out  # 0.48 over 0.40, in each round


def test_repeat_takes_a_whole_number_of_at_least_one(capsys):
    with pytest.raises(SystemExit):
        main(["--repeat", "0"])
    assert "0 is not a whole number of at least 1" in capsys.readouterr().err


def test_a_protocol_is_a_file_or_the_name_of_a_shipped_one(capsys):
    assert protocol_file("teams3") == protocol_file(str(TEAMS3.resolve()))
    assert protocol_file("teams3").name == "teams3.toml"
    with pytest.raises(SystemExit):
        main(["--protocol", "teams4"])
    error = capsys.readouterr().err
    assert "teams4 is neither a protocol file nor one of protocols/" in error
    assert "teams3" in error


def test_a_teammates_station_counts_as_seen_only_if_its_end_was_pushed_to_each_member():
    tally = Tally(stations_seen={(7, 0, "bo"): (2, 3), (7, 0, "cy"): (2, 1)})
    row = _row(1, 1000, 0.7, 0.7, 20)
    row = Row(**{**vars(row), "tally": tally, "pushes_per_message": 0.9,
                 "final_stations": {(7, 0, "bo"): (2, 3), (7, 0, "cy"): (2, 3),
                                    (7, 1, "ada"): (1, 0)}})
    assert row.pushes_unseen() == 2  # cy heard an earlier element, ada nothing at all
    assert "teammates' stations seen at their end 1 of 3 in 1 team rounds closed in the " \
           "window (0.90 stations pushes a message in the window)" in row.details()
    assert not row.goal_met()
