"""A page opened again mid-round gets the unfinished cookie back: the state of a running
round carries the elements last stored for it (``round.on_cookie``,
docs/socket-protocol.md), in an individual study and in a real team's round.

The clock is injected; a refresh is a new connection of the same browser that joins again.
"""

from __future__ import annotations

from typing import Any

from support.journey import Browser, through_preferences
from support.people import Person, practise, running, to_session
from support.teams import team_protocol
from support.web import FakeClock, make_app, page_socket

from study.web.participant.progress import PLAYED_REPORT_SECONDS


def placed(browser: Browser, round_state: dict[str, Any], content: Any) -> None:
    reply = browser.send("progress", {"round_id": round_state["id"], "content": content})
    assert reply["ok"], reply


def refreshed(app: Any, code: str) -> tuple[Browser, dict[str, Any]]:
    """The page opened again (a new connection of the browser that joins) and the running
    round it gets."""
    page = Browser(app, code)
    reply = page.join()
    assert reply["ok"], reply
    return page, reply["state"]["round"]


def test_a_refresh_gets_the_boxes_of_the_unfinished_cookie_back(app, clock):
    you = Browser(app, "boxes-1")
    through_preferences(you)
    round_state = you.start(1)
    assert round_state["on_cookie"] == [], "nothing placed yet"
    assert round_state["progress_seconds"] == 0, "practice measures: every element at once"
    cells = round_state["target"]["cells"]
    wrong = next(cell for cell in range(round_state["target"]["rows"]
                                        * round_state["target"]["cols"]) if cell not in cells)
    for count in range(1, 9):
        clock.advance(0.4)
        placed(you, round_state, sorted(cells[:count]))
    clock.advance(0.4)
    placed(you, round_state, sorted([*cells[:8], wrong]))
    you.client.disconnect()
    _, again = refreshed(app, "boxes-1")
    assert (again["id"], again["cookies"]) == (round_state["id"], 0)
    assert again["on_cookie"] == sorted([*cells[:8], wrong]), "8 boxes and a wrong one"


def test_a_finished_cookie_starts_the_next_one_empty(app, clock):
    you = Browser(app, "boxes-2")
    through_preferences(you)
    round_state = you.start(1)
    cells = round_state["target"]["cells"]
    placed(you, round_state, cells[:5])
    clock.advance(2.0)
    assert you.cookie(round_state)["ok"]
    you, again = refreshed(app, "boxes-2")
    assert again["on_cookie"] == [], "the 5 boxes went into cookie 1"
    placed(you, round_state, cells[:2])
    _, again = refreshed(app, "boxes-2")
    assert (again["cookies"], again["on_cookie"]) == (1, cells[:2])


def test_a_refresh_gets_the_letters_back_in_order_with_a_wrong_one_taken_off(app, clock):
    you = Browser(app, "letters-1")
    through_preferences(you)
    for number in (1, 2):
        you.start(number)
        clock.advance(app.extensions["study"].protocol.practice_seconds)
        app.extensions["study"].tick(clock.now)
    round_state = you.start(3)
    assert round_state["target"]["kind"] == "letters" and round_state["on_cookie"] == ""
    letters = round_state["target"]["letters"]
    for content in (letters[:1], letters[:2], letters[:2] + "X", letters[:2],
                    letters[:3]):
        clock.advance(0.5)
        placed(you, round_state, content)
    assert refreshed(app, "letters-1")[1]["on_cookie"] == letters[:3]


def test_a_closed_round_carries_no_unfinished_cookie(app, clock):
    you = Browser(app, "closed-1")
    through_preferences(you)
    round_state = you.start(1)
    placed(you, round_state, round_state["target"]["cells"][:3])
    clock.advance(app.extensions["study"].protocol.practice_seconds)
    app.extensions["study"].tick(clock.now)
    _, again = refreshed(app, "closed-1")
    assert again["running"] is False and "on_cookie" not in again


def test_a_team_member_gets_the_unfinished_cookie_back(tmp_path, teammates):
    clock = FakeClock()
    app = make_app(tmp_path, teammates, clock, team_protocol(tmp_path))
    ada, bo = Person(app, "ada-9"), Person(app, "bo-99")
    practise(app, clock, ada)
    practise(app, clock, bo, ratings=(2, 6))
    to_session(app, clock, [ada, bo], 1)
    round_state = running(ada)
    assert round_state["progress_seconds"] == PLAYED_REPORT_SECONDS, "a played round"
    target = round_state["target"]
    content = target["letters"][:4] if target["kind"] == "letters" else target["cells"][:6]
    clock.advance(1.0)
    assert ada.send("progress", {"round_id": round_state["id"], "content": content})["ok"]
    ada.leave()
    page, _ = page_socket(app, "ada-9", ada.browser)  # the same browser opens it again
    again = page.emit("join", {"code": "ada-9"}, callback=True)["state"]["round"]
    assert (again["id"], again["on_cookie"]) == (round_state["id"], content)
    assert running(bo)["stations"][0]["placed"] == len(content), "the teammate sees them too"
