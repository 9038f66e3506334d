"""How the pages present an individual study's agent teammate (``[study] agent_teammate``,
docs/protocol.md): as the agent it is unless the protocol declares the paper's method,
which presents it as a person until the debrief; never concealed beside a ``[team]``."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from support.teams import team_protocol

from study.commands.check import summary
from study.commands.serve import _print_links
from study.protocol.loader import ProtocolError, load_protocol, parse_protocol
from study.protocol.texts import CONCEALED_AGENT_TEXTS, DEFAULT_TEXTS

ROOT = Path(__file__).resolve().parents[2]
DEMO = (ROOT / "protocols" / "demo.toml").read_text(encoding="utf-8")
AS_A_PERSON = re.compile(r"next door|Nebenraum|another participant|andere(n)? "
                         r"(teilnehmende )?Person", re.IGNORECASE)
DECLARED = 'agent_teammate = "disclosed"'


def words_of(protocol_path: Path) -> str:
    """Every page text and page word of the protocol that a participant reads before the
    debrief (the post-study check may name the options it asks about)."""
    protocol = load_protocol(protocol_path)
    before_debrief = [page.title + " " + page.text for name, page in protocol.pages.items()
                      if name not in ("debrief", "done", "withdrawn")]
    shown = [text for key, text in protocol.texts.items()  # next_room: when concealed only
             if key != "next_room" or protocol.agent_teammate == "concealed"]
    return " ".join([*before_debrief, *shown])


def test_a_protocol_that_does_not_say_discloses_its_agent():
    protocol = parse_protocol(DEMO.replace(DECLARED, ""))
    assert protocol.agent_teammate == "disclosed"
    assert protocol.texts == DEFAULT_TEXTS
    assert not AS_A_PERSON.search(" ".join(DEFAULT_TEXTS.values()))


def test_concealed_defaults_to_the_room_next_door_and_the_protocol_still_overrides():
    concealed = DEMO.replace(DECLARED, 'agent_teammate = "concealed"')
    protocol = parse_protocol(concealed)
    assert protocol.agent_teammate == "concealed"
    assert protocol.texts == {**DEFAULT_TEXTS, **CONCEALED_AGENT_TEXTS}
    assert all(AS_A_PERSON.search(text) or "Teammate" in text
               for text in CONCEALED_AGENT_TEXTS.values())
    own = concealed.replace("[recruitment]", '[texts]\nteammate_station = "Station 2"\n\n'
                            "[recruitment]", 1)
    assert parse_protocol(own).texts["teammate_station"] == "Station 2"


@pytest.mark.parametrize("value", ["hidden", "", "true"])
def test_an_unknown_way_is_refused_at_its_key(value):
    with pytest.raises(ProtocolError) as error:
        parse_protocol(DEMO.replace(DECLARED, f'agent_teammate = "{value}"'))
    assert error.value.field == "study.agent_teammate"


def test_a_team_study_cannot_conceal_an_agent(tmp_path):
    path = team_protocol(tmp_path)
    assert load_protocol(path).team is not None
    text = path.read_text(encoding="utf-8")
    with pytest.raises(ProtocolError) as error:
        parse_protocol(text.replace(DECLARED, 'agent_teammate = "concealed"'))
    assert error.value.field == "study.agent_teammate" and "[team]" in str(error.value)


@pytest.mark.parametrize("name", ["demo", "demo-de"])
def test_the_demos_never_call_their_agent_a_person(name):
    path = ROOT / "protocols" / f"{name}.toml"
    assert load_protocol(path).agent_teammate == "disclosed"
    assert not AS_A_PERSON.search(words_of(path))


@pytest.mark.parametrize("name", ["study1", "study2", "study2-paper", "welfare"])
def test_the_papers_studies_declare_the_concealment_they_use(name):
    path = ROOT / "protocols" / f"{name}.toml"
    protocol = load_protocol(path)
    assert protocol.agent_teammate == "concealed" and AS_A_PERSON.search(words_of(path))
    assert "computer agent" in protocol.pages["debrief"].text  # disclosed at the end


def serve_lines(protocol_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    args = argparse.Namespace(host="127.0.0.1", port=8000, workers=1, durability="normal")
    _print_links(load_protocol(protocol_path), Path("study.sqlite"), Path("pool.parquet"),
                 args, None)
    return capsys.readouterr().out


def test_serving_a_concealed_agent_says_so_to_the_experimenter(capsys):
    assert "presented as a person" in serve_lines(ROOT / "protocols" / "study1.toml", capsys)
    assert "presented as a person" not in serve_lines(ROOT / "protocols" / "demo.toml",
                                                      capsys)


def test_the_check_says_how_the_agent_is_presented():
    def teammate_line(name: str) -> str:
        lines = summary(load_protocol(ROOT / "protocols" / f"{name}.toml"))
        return next(line for line in lines if line.lstrip().startswith("teammate "))

    assert teammate_line("demo").endswith("the pages say it is a computer agent")
    assert "as a person in the room next door until the debrief" in teammate_line("study1")
