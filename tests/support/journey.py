"""A participant's page as a Socket.IO test client, and the steps of the individual journey."""

from __future__ import annotations

import weakref
from typing import Any, ClassVar

from support.web import FakeClock, journey, msg, page_socket


class Browser:
    """One Socket.IO connection of a participant, speaking the documented protocol."""

    browsers: ClassVar[weakref.WeakKeyDictionary[Any, Any]] = weakref.WeakKeyDictionary()

    def __init__(self, app: Any, code: str) -> None:
        self.app = app  # every Browser of a test is a tab of the same browser
        self.client, browser = page_socket(app, code, Browser.browsers.get(app))
        Browser.browsers[app] = browser
        self.code = code

    def join(self) -> dict[str, Any]:
        return self.client.emit("join", {"code": self.code}, callback=True)

    def send(self, event: str, payload: dict[str, Any], msg_id: str | None = None) -> dict:
        return self.client.emit(event, {"msg_id": msg_id or msg(), **payload}, callback=True)

    def submit(self, step: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.send("submit", {"step": step, "data": data or {}})
        assert reply["ok"], reply
        return reply["state"]

    def start(self, number: int) -> dict[str, Any]:
        reply = self.send("start_round", {"round": number})
        assert reply["ok"], reply
        return reply["state"]["round"]

    def cookie(self, round_state: dict[str, Any]) -> dict[str, Any]:
        target = round_state["target"]
        content = target["text"] if target["kind"] == "letters" else target["cells"][::-1]
        return self.send("cookie", {"round_id": round_state["id"], "content": content})


def through_preferences(browser: Browser) -> None:
    assert browser.join()["ok"]
    browser.submit("consent", {"agree": True})
    browser.submit("themes")
    browser.submit("preferences", {"ratings": {"ravens": 7, "steelers": 1}})


def play_practice(browser: Browser, clock: FakeClock, app: Any, cookies: int = 2) -> None:
    for number in range(1, 5):
        round_state = browser.start(number)
        for _ in range(cookies):
            clock.advance(1.0)
            assert browser.cookie(round_state)["ok"]
        clock.advance(journey(app).protocol.practice_seconds)
        assert journey(app).tick(clock.now) == 1


def play_session(browser: Browser, clock: FakeClock, app: Any, session: int) -> None:
    browser.submit(f"intro-{session}")
    for number in (1, 2):
        round_state = browser.start(number)
        clock.advance(1.5)
        assert browser.cookie(round_state)["ok"]
        clock.advance(journey(app).protocol.round_seconds)
        journey(app).tick(clock.now)


SESSION_ANSWERS = {"cap_agree": 6, "cap_rating": 5, "pref_agree": 4, "pref_rating": 3,
                   "fair_overall": 2, "fair_overall_why": "It gave me the cookies I do best."}
