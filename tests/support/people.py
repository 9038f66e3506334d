"""People of the tests' studies: a page speaking the documented Socket.IO protocol, and
practice and sessions played on the injected clock."""

from __future__ import annotations

from typing import Any

from support.web import FakeClock, journey, msg, page_socket


class Person:
    """One person's page: a Socket.IO connection speaking the documented protocol."""

    def __init__(self, app: Any, code: str) -> None:
        self.app, self.code = app, code
        self.client, self.browser = page_socket(app, code)
        assert self.client.emit("join", {"code": code}, callback=True)["ok"]

    def send(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self.client.emit(event, {"msg_id": msg(), **payload}, callback=True)

    def submit(self, step: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.send("submit", {"step": step, "data": data or {}})
        assert reply["ok"], reply
        return reply["state"]

    def state(self) -> dict[str, Any]:
        return self.client.emit("sync", {}, callback=True)["state"]

    def pushed(self, event: str) -> list[dict[str, Any]]:
        return [item["args"][0] for item in self.client.get_received() if item["name"] == event]

    def cookie(self, round_state: dict[str, Any]) -> dict[str, Any]:
        target = round_state["target"]
        content = target["text"] if target["kind"] == "letters" else target["cells"][::-1]
        return self.send("cookie", {"round_id": round_state["id"], "content": content})

    def first_element(self, round_state: dict[str, Any]) -> dict[str, Any]:
        """The cookie's first element placed, reported as the page reports it."""
        target = round_state["target"]
        content = target["letters"][:1] if target["kind"] == "letters" else target["cells"][:1]
        return self.send("progress", {"round_id": round_state["id"], "content": content})

    def leave(self) -> None:
        self.client.disconnect()


def practise(app: Any, clock: FakeClock, person: Person, squares: int = 1, letters: int = 3,
             ratings: tuple[int, int] = (7, 1)) -> None:
    """Consent, ratings and four practice rounds, finishing ``squares`` and ``letters``
    cookies in the measured rounds, each after its first element's report (a practice
    whose cookies come without one is not a person's, ``progress.not_a_person``)."""
    person.submit("consent", {"agree": True})
    person.submit("themes")
    person.submit("preferences", {"ratings": {"ravens": ratings[0], "steelers": ratings[1]}})
    for number, count in enumerate((1, squares, 1, letters), 1):
        round_state = person.send("start_round", {"round": number})["state"]["round"]
        for _ in range(count):
            clock.advance(1.0)
            assert person.first_element(round_state)["ok"]
            assert person.cookie(round_state)["ok"]
        clock.advance(journey(app).protocol.practice_seconds)
        journey(app).tick(clock.now)


def tick_until(app: Any, clock: FakeClock, done: Any, step: float = 1.0,
               limit: int = 600) -> None:
    """Move the clock a second at a time, ticking, until ``done()`` holds."""
    for _ in range(limit):
        if done():
            return
        clock.advance(step)
        journey(app).tick(clock.now)
    raise AssertionError("the condition never held")


def running(person: Person) -> dict[str, Any] | None:
    round_state = person.state()["round"]
    return round_state if round_state and round_state["running"] else None


def to_session(app: Any, clock: FakeClock, people: list[Person], number: int) -> None:
    for person in people:
        if number == 1:
            person.submit("teammate")
        person.submit(f"intro-{number}")
    tick_until(app, clock, lambda: all(running(person) for person in people))


def play_round(app: Any, clock: FakeClock, people: list[Person]) -> None:
    states = [running(person) for person in people]
    clock.advance(1.5)
    for person, round_state in zip(people, states, strict=True):
        if round_state is not None:
            assert person.cookie(round_state)["ok"]
    clock.advance(journey(app).protocol.round_seconds)
    journey(app).tick(clock.now)
