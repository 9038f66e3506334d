"""Studies of two to four conditions: what ``study check`` refuses, the orders a
counterbalanced study rotates through (every order of three, a Williams square of four),
and the orders participants are given at consent."""

from __future__ import annotations

import json
import re
from collections import Counter
from itertools import permutations
from pathlib import Path

import pytest
from support.protocols import THREE, four_robots, with_conditions
from support.web import DEMO, FakeClock, make_app, small_pool

from study.cli import main
from study.protocol.loader import ProtocolError, load_protocol, parse_protocol
from study.protocol.orders import counterbalanced, williams_square

ROOT = Path(__file__).resolve().parents[2]
FIFTH = '''
[[conditions]]
id = "fea-fair"
algorithm = "fea"
robot = "Kim"
w = 0.2
fea_bounds = [0.0, 4.0]
'''


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """The 1-based line of the ``occurrence``-th ``needle`` in ``text``."""
    position = -1
    for _ in range(occurrence):
        position = text.index(needle, position + 1)
    return text.count("\n", 0, position) + 1


def refused(text: str, tmp_path: Path) -> ProtocolError:
    path = tmp_path / "protocol.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProtocolError) as caught:
        load_protocol(path)
    return caught.value


# --- what study check takes and refuses -------------------------------------------------


def test_two_three_and_four_conditions_load_with_one_session_each(tmp_path):
    assert load_protocol(DEMO).sessions == 2
    three = load_protocol(THREE)
    assert [c.id for c in three.conditions] == ["efficient", "fair", "fea"]
    assert three.sessions == 3
    assert {item.kind for item in three.post_questionnaire.items} >= {"rank", "pairwise"}
    assert load_protocol(four_robots(tmp_path)).sessions == 4


def test_one_condition_is_refused_at_the_conditions_line(tmp_path):
    text = DEMO.read_text(encoding="utf-8")
    second = text.index("[[conditions]]", text.index("[[conditions]]") + 1)
    one = text[:second] + text[text.index("\n[", second + 1) + 1:]
    error = refused(one, tmp_path)
    assert error.line == line_of(one, "[[conditions]]\nid")
    assert error.field == "conditions"
    assert "a study compares 2 to 4 conditions, one session each (got 1)" in str(error)


def test_five_conditions_are_refused_at_the_fifth(tmp_path):
    five = with_conditions(four_robots(tmp_path).read_text(encoding="utf-8"), FIFTH)
    error = refused(five, tmp_path)
    assert error.line == line_of(five, "[[conditions]]\nid", 5)
    assert error.field == "conditions.4"
    assert "(got 5)" in str(error)


def test_study_check_names_file_line_and_field_and_exits_2(tmp_path, capsys):
    text = DEMO.read_text(encoding="utf-8")
    second = text.index("[[conditions]]", text.index("[[conditions]]") + 1)
    path = tmp_path / "one.toml"
    path.write_text(text[:second] + text[text.index("\n[", second + 1) + 1:],
                    encoding="utf-8")
    assert main(["check", str(path)]) == 2
    line = line_of(path.read_text(encoding="utf-8"), "[[conditions]]\nid")
    assert f"{path}:{line}: conditions: a study compares 2 to 4 conditions" in \
        capsys.readouterr().err


def test_a_third_robot_with_a_taken_name_or_id_is_refused_at_its_line(tmp_path):
    text = THREE.read_text(encoding="utf-8")
    same_name = text.replace('robot = "Sam"', 'robot = "chris"')
    error = refused(same_name, tmp_path)
    assert (error.line, error.field) == (line_of(same_name, 'robot = "chris"'),
                                         "conditions.2.robot")
    same_id = text.replace('id = "fea"\nalgorithm', 'id = "fair"\nalgorithm')
    error = refused(same_id, tmp_path)
    assert error.field == "conditions.2.id" and "'fair' is repeated" in str(error)


def test_rank_and_pairwise_items_belong_to_the_post_questionnaire(tmp_path):
    text = THREE.read_text(encoding="utf-8")
    item = '\n[[questionnaires.session.items]]\nid = "order"\nkind = "rank"\ntext = "Order them."\n'
    anchor = text.index("[questionnaires.post]")
    in_session = text[:anchor] + item + "\n" + text[anchor:]
    error = refused(in_session, tmp_path)
    assert error.field == "questionnaires.session.items.6.kind"
    assert error.line == line_of(in_session, 'kind = "rank"')
    assert "ask it in [questionnaires.post]" in str(error)
    check = text.replace('manipulation_check_item = "teammate_believed"',
                         'manipulation_check_item = "fairer"').replace(
        'manipulation_check_pass = ["Yes, another person"]', "")
    error = refused(check.replace('"failed-manipulation-check", ', ""), tmp_path)
    assert error.field == "analysis.manipulation_check_item" and "pairwise" in str(error)


def test_a_pairwise_tie_must_say_something():
    text = THREE.read_text(encoding="utf-8").replace('tie = "No difference"', 'tie = "  "')
    with pytest.raises(ProtocolError) as caught:
        parse_protocol(text, "three.toml")
    assert caught.value.field == "questionnaires.post.items.1.tie"


# --- the orders in rotation -------------------------------------------------------------


def test_two_conditions_rotate_the_listed_order_and_its_reverse():
    assert counterbalanced(["efficient", "fair"], "alternate") == [["efficient", "fair"],
                                                                     ["fair", "efficient"]]
    assert counterbalanced(["efficient", "fair", "fea"], "fixed") == [["efficient", "fair",
                                                                        "fea"]]


def test_three_conditions_rotate_through_every_order():
    orders = counterbalanced(["a", "b", "c"], "alternate")
    assert orders[0] == ["a", "b", "c"]
    assert sorted(map(tuple, orders)) == sorted(permutations("abc"))


def assert_williams(rows: list[list[int]]) -> None:
    """A balanced Latin square: every row an order of all conditions, every condition once
    at each position, and every ordered pair of two conditions adjacent exactly once."""
    n = len(rows)
    assert all(sorted(row) == list(range(n)) for row in rows)
    assert all(sorted(column) == list(range(n)) for column in zip(*rows, strict=True))
    adjacent = Counter((row[k], row[k + 1]) for row in rows for k in range(n - 1))
    assert set(adjacent) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert set(adjacent.values()) == {1}


@pytest.mark.parametrize("n", [2, 4, 6, 8])
def test_the_williams_square_is_balanced_for_position_and_the_condition_before(n):
    rows = williams_square(n)
    assert rows[0] == list(range(n))
    assert_williams(rows)


def test_four_conditions_rotate_through_a_williams_square():
    orders = counterbalanced(["a", "b", "c", "d"], "alternate")
    assert len(orders) == 4 and orders[0] == ["a", "b", "c", "d"]
    assert_williams([["abcd".index(x) for x in order] for order in orders])


def test_an_odd_williams_square_is_refused():
    with pytest.raises(ValueError, match="even number"):
        williams_square(3)


# --- the orders participants are given ---------------------------------------------------


def consent_all(app, count: int) -> list[tuple[str, ...]]:
    """``count`` participants consent one after the other; their orders, in that order."""
    journey = app.extensions["study"]
    for k in range(count):
        code = f"person{k:03d}"
        journey.enrol(code)
        reply = journey.handle("submit", code, {"msg_id": f"consent-{k:04d}",
                                                "step": "consent", "data": {"agree": True}})
        assert reply["ok"], reply
    return [tuple(json.loads(row["condition_order"])) for row in journey.storage.all(
        "SELECT condition_order FROM participants ORDER BY id")]


@pytest.fixture(scope="module")
def teammates(tmp_path_factory):
    return small_pool(tmp_path_factory.mktemp("pools"))


def test_twelve_participants_of_three_robots_hold_each_of_the_six_orders_twice(
        tmp_path, teammates):
    app = make_app(tmp_path, teammates, FakeClock(), THREE)
    held = consent_all(app, 12)
    assert held[:6] == [tuple(order) for order in counterbalanced(
        ["efficient", "fair", "fea"], "alternate")]  # fewest held, ties the listed first
    assert Counter(held) == dict.fromkeys(permutations(("efficient", "fair", "fea")), 2)


def test_eight_participants_of_four_robots_hold_each_williams_row_twice(tmp_path, teammates):
    app = make_app(tmp_path, teammates, FakeClock(), four_robots(tmp_path))
    held = consent_all(app, 8)
    rows = [tuple(order) for order in counterbalanced(
        ["efficient", "fair", "fea", "maximin"], "alternate")]
    assert Counter(held) == dict.fromkeys(rows, 2)
    assert_williams([[rows[0].index(x) for x in order] for order in held[:4]])


def test_the_summary_says_how_the_orders_rotate(tmp_path, capsys):
    assert main(["check", str(THREE), str(four_robots(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "counterbalanced over all 6 orders" in out
    assert re.search(r"counterbalanced over the 4 orders of a balanced Latin square", out)
    assert "3 sessions of 2 rounds" in out and "4 sessions of 2 rounds" in out
