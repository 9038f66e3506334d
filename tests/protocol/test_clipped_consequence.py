"""What a capability clipped at 0.01 or 0.99 leads to (``[study] clipped_capability``,
docs/protocol.md): each declared value loads and ``study check`` says what follows it;
``"keep"``, which analyses the clipped and reports without them beside it, is refused
beside an ``[analysis] exclude`` that leaves them out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from study.commands.check import summary
from study.protocol.loader import ProtocolError, parse_protocol
from study.protocol.schema import CLIPPED_CAPABILITY

ROOT = Path(__file__).resolve().parents[2]
DEMO = (ROOT / "protocols" / "demo.toml").read_text(encoding="utf-8")
FOLLOWS = {
    "continue": "the participant continues; the analysis leaves them out "
                "(clipped-capability)",
    "unmatched": "the unmatched page once practice ends, before a team is formed",
    "keep": "the participant continues on the clipped value, flagged; the report gives "
            "every confirmatory result with and without them"}


def demo_with(consequence: str) -> str:
    """The demo protocol's text with ``[study] clipped_capability = consequence``."""
    text, found = re.subn(r"(?m)^clipped_capability = .*$",
                          f'clipped_capability = "{consequence}"', DEMO)
    assert found == 1
    return text


def test_every_value_has_its_words_in_the_check():
    assert set(FOLLOWS) == set(CLIPPED_CAPABILITY)


@pytest.mark.parametrize("consequence", list(FOLLOWS))
def test_the_value_loads_and_the_check_says_what_follows(consequence: str):
    protocol = parse_protocol(demo_with(consequence))
    assert protocol.clipped_capability == consequence
    line = next(line for line in summary(protocol) if line.lstrip().startswith("clipped "))
    assert line.endswith(f"a capability at 0.01 or 0.99 is not a measurement: "
                         f"{FOLLOWS[consequence]}")


def test_the_published_schema_offers_keep():
    schema = json.loads((ROOT / "docs" / "protocol.schema.json").read_text(encoding="utf-8"))
    found = [node["enum"] for node in _nodes(schema)
             if isinstance(node, dict) and node.get("title") == "Clipped Capability"]
    assert found == [["continue", "unmatched", "keep"]]


def _nodes(node: object) -> list[object]:
    """Every dict and list nested in ``node``, itself first."""
    children = (node.values() if isinstance(node, dict)
                else node if isinstance(node, list) else [])
    return [node, *(found for child in children for found in _nodes(child))]


def test_an_unknown_value_is_refused_at_its_key():
    with pytest.raises(ProtocolError) as error:
        parse_protocol(demo_with("drop"))
    assert error.value.field == "study.clipped_capability"
    assert "'keep'" in str(error.value)


def test_keep_is_refused_beside_an_exclusion_of_the_clipped():
    text, found = re.subn(r"(?m)^exclude = .*$", 'exclude = ["aborted", "clipped-capability"]',
                          demo_with("keep"))
    assert found == 1
    with pytest.raises(ProtocolError) as error:
        parse_protocol(text)
    assert error.value.field == "analysis.exclude"
    assert 'clipped_capability = "keep" keeps in the analysis' in str(error.value)
    continued = parse_protocol(text.replace('clipped_capability = "keep"',
                                            'clipped_capability = "continue"'))
    assert continued.analysis.exclude == ("aborted", "clipped-capability")
