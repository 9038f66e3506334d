"""Teammates on one process, in real Chromium under ``study serve --workers 2``: three
people of teams3 practise (each page connected to the process its code hashes to: the
codes are chosen so that two of them start on different workers), meet in the lobby, and
once the team forms every page connects again with the team's route. All three
connections then sit on one worker, each finished cookie reaches the others' pages live,
and not one station push went through the message queue.
"""

from __future__ import annotations

import time

import pytest
from support.browser import DESKTOP, Participant, play_team_round, practise, short_teams3
from support.servers import query

from study.bots.servers import ServeProcess

pytestmark = [pytest.mark.browser, pytest.mark.slow]
CODES = ("ada-1", "ada-2", "dan-4")  # by HAProxy's hash: worker 1, 2, 2


@pytest.mark.minutes(3)
def test_a_team_of_browsers_ends_on_one_worker(tmp_path, browser):
    protocol_file = short_teams3(tmp_path)
    db = tmp_path / "study.sqlite"
    server = ServeProcess(protocol_file, db, tmp_path / "pools", tmp_path / "serve.log",
                          extra=("--workers", "2"))
    contexts = []
    try:
        server.start(timeout=180)
        contexts = [browser.new_context(viewport=DESKTOP) for _ in CODES]
        people = [Participant(context.new_page(), None) for context in contexts]
        for person, code in zip(people[:2], CODES[:2], strict=True):
            practise(person, server.url, code)
        lobby = query(db, "SELECT code, process FROM connections")
        practise(people[2], server.url, CODES[2])  # the last arrival forms the team
        for person in people:
            person.step("teammate")
            person.click("continue")
            person.step("intro-1")
            person.click("continue")
        play_team_round(people)
        places = query(db, "SELECT code, process FROM connections")
        time.sleep(2.5)  # each process stores its counts every second
        published = {row["name"]: row["count"]
                     for row in query(db, "SELECT * FROM counters WHERE name LIKE 'queued:%'")}
    finally:
        for context in contexts:
            context.close()
        server.stop()
    assert sorted(row["code"] for row in lobby) == sorted(CODES[:2])
    assert len({row["process"] for row in lobby}) == 2  # apart before the team formed
    assert sorted(row["code"] for row in places) == sorted(CODES), server.output()[-2000:]
    assert len({row["process"] for row in places}) == 1
    assert published.get("queued:station", 0) == 0, published
