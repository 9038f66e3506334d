"""Bots: simulated participants going through the whole study over HTTP and Socket.IO
against a real server, with every behaviour, and ``study bot``."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from support.web import LiveServer

from study.bots import BEHAVIOURS, Profile, StudyFacts, bot_codes, run_swarm
from study.bots.participant import Behaviour
from study.bots.servers import ServeProcess, quick_protocol
from study.cli import main
from study.commands.bot import codes_from
from study.protocol.loader import load_protocol
from study.web import create_app
from study.web.participant.agent_pool import PoolTeammates

ROOT = Path(__file__).resolve().parents[2]
ROUNDS_PER_BOT = 4 + 2 + 2  # practice, session 1, session 2 of the demo protocol


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The demo protocol with short rounds, served from a thread on a free port."""
    tmp = tmp_path_factory.mktemp("bots")
    protocol = quick_protocol(ROOT / "protocols" / "demo.toml", tmp / "quick.toml",
                              round_seconds=2.5, practice_seconds=1.5)
    loaded = load_protocol(protocol)
    app = create_app({"PROTOCOL": protocol, "DATABASE": tmp / "study.sqlite",
                      "TEAMMATES": PoolTeammates.for_protocol(loaded, tmp / "pools")})
    with LiveServer(app) as server:
        yield server.url, tmp / "study.sqlite", protocol, StudyFacts.from_protocol(loaded)


def rows(db: Path, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(sql, params).fetchall()


@pytest.mark.minutes(0.45)
def test_every_behaviour_finishes_and_nothing_acknowledged_is_missing(served):
    url, db, _, facts = served
    quick = {"refreshing": replace(BEHAVIOURS["refreshing"], refresh_at=0.3),
             "disconnecting": Behaviour("disconnecting", refresh_at=0.2, away_seconds=0.8),
             "slow": replace(BEHAVIOURS["slow"], read_seconds=0.1),
             "idle": replace(BEHAVIOURS["idle"], read_seconds=0.1)}
    behaviours = [quick.get(name, BEHAVIOURS[name]) for name in BEHAVIOURS]
    profiles = [Profile((0.8, 0.7), (0.5, 0.5), b, seed=i) for i, b in enumerate(behaviours)]
    profiles[0] = Profile((0.9, 0.15), (0.9, 0.1), BEHAVIOURS["fast"], seed=99)
    codes = bot_codes(len(profiles))
    result = run_swarm(url, codes, profiles, facts=facts, max_seconds=90)
    by_behaviour = {o.behaviour: o for o in result.outcomes}
    assert [o.error for o in result.outcomes] == [None] * len(profiles), result.summary()
    assert {o.final_step for o in result.outcomes} == {"done"}
    for code in codes:
        assert rows(db, "SELECT count(*) FROM rounds r JOIN participants p ON "
                        "p.id = r.participant_id WHERE p.code = ?", code) == [(ROUNDS_PER_BOT,)]
    assert by_behaviour["idle"].cookies == 0
    assert by_behaviour["slow"].cookies > 0
    assert by_behaviour["refreshing"].reconnects >= ROUNDS_PER_BOT
    assert by_behaviour["disconnecting"].reconnects >= ROUNDS_PER_BOT
    stored = set(rows(db, "SELECT p.code, m.msg_id FROM messages m JOIN participants p "
                          "ON p.id = m.participant_id"))
    acked = {(a.code, a.msg_id) for a in result.log.acked}
    assert acked and acked <= stored
    cookies = {msg for (msg,) in rows(db, "SELECT msg_id FROM cookies WHERE actor = "
                                          "'participant'")}
    assert {a.msg_id for a in result.log.acked if a.event == "cookie"} <= cookies
    # A message sent just before its round's deadline may reach a loaded server after it,
    # and is refused as the page's would be; nothing else is refused, nor anything earlier.
    assert {reason for *_, reason in result.log.refused} <= {"round-closed"}
    late = ("SELECT count(*) FROM rejections j JOIN rounds r ON r.id = json_extract(j.payload, "
            "'$.round_id') WHERE j.reason = 'round-closed' AND (j.at > r.deadline OR "
            "j.at >= r.closed_at)")
    assert rows(db, late) == rows(db, "SELECT count(*) FROM rejections WHERE reason = "
                                      "'round-closed'")
    assert_measured_back(db, codes[0], profiles[0])


def assert_measured_back(db: Path, code: str, profile: Profile) -> None:
    """The bot decorates at its decorator's pace and rates themes by its preferences, so
    the server measures roughly the profile it was given, from valid cookies."""
    measured = dict(rows(db, "SELECT m.kind || m.task_type, m.value FROM measurements m "
                             "JOIN participants p ON p.id = m.participant_id WHERE p.code = ?",
                         code))
    assert measured["capability0"] > measured["capability1"]
    for task_type, preference in enumerate(profile.preferences):
        assert measured[f"preference{task_type}"] == pytest.approx(preference, abs=0.09)
    contents = rows(db, "SELECT c.content FROM cookies c JOIN participants p ON "
                        "p.id = c.participant_id WHERE p.code = ? AND c.actor = 'participant'",
                    code)
    assert contents and all(json.loads(content) for (content,) in contents)


def test_study_bot_command_runs_a_swarm_and_summarises(served, capsys):
    url, _, protocol, _ = served
    assert main(["bot", url, "--participants", "2", "--protocol", str(protocol),
                 "--behaviour", "fast,refreshing", "--max-seconds", "60"]) == 0
    out = capsys.readouterr().out
    assert "2 bots" in out and "final steps: done 2" in out and "cookie ack latency" in out


def test_codes_come_from_links_or_plain_lines(tmp_path):
    path = tmp_path / "links.txt"
    path.write_text("# links\nhttp://127.0.0.1:5000/p/abc123\nxyz789\n\n")
    assert codes_from(path, 2) == ["abc123", "xyz789"]


def test_unknown_behaviour_is_a_clear_error(capsys):
    assert main(["bot", "http://127.0.0.1:9", "--behaviour", "sleepy"]) == 2
    assert "sleepy" in capsys.readouterr().err


def test_a_server_that_cannot_start_says_why(tmp_path):
    """A load run or a test whose server stops before it is ready names the cause."""
    protocol = tmp_path / "broken.toml"
    protocol.write_text("[study\n", encoding="utf-8")
    server = ServeProcess(protocol, tmp_path / "s.sqlite", tmp_path / "pools",
                          tmp_path / "serve.log")
    with pytest.raises(RuntimeError, match=r"before it was ready; its last words: study: error:"):
        server.start(timeout=60)
