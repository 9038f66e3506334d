"""The post questionnaire's words fit the number of robots met: no text of it counts the
robots otherwise ("Which of the two robots" above three robots' pairs), and each row of
a pairwise item is captioned with its two robots."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.protocols import THREE

from study.protocol.loader import Protocol, load_protocol
from study.web.participant.pages import page

ROOT = Path(__file__).resolve().parents[3]
PROTOCOLS = [*sorted((ROOT / "protocols").glob("*.toml")), THREE]
# The words that count robots, in the shipped protocols' languages.
COUNTS = {"two": 2, "both": 2, "three": 3, "four": 4,
          "zwei": 2, "beide": 2, "beiden": 2, "drei": 3, "vier": 4}
COUNTING = re.compile(r"\b(" + "|".join(COUNTS) + r")\b", re.IGNORECASE)


def two_robots(folder: Path) -> Path:
    """The three-robot protocol without its third robot, Robot Sam (FEA)."""
    text = THREE.read_text(encoding="utf-8")
    for old, new in (('name = "three"', 'name = "two"'),
                     ("You worked with three robots: Robot {robot:efficient}, Robot "
                      "{robot:fair} and Robot {robot:fea}.",
                      "You worked with two robots: Robot {robot:efficient} and Robot "
                      "{robot:fair}."),
                     ("Put all three in order", "Put both in order")):
        assert old in text, old
        text = text.replace(old, new)
    text, removed = re.subn(r'(?s)\[\[conditions\]\]\nid = "fea"\n.*?\n\n', "", text)
    assert removed == 1
    path = folder / "two.toml"
    path.write_text(text, encoding="utf-8")
    return path


def post_page(protocol: Protocol) -> dict[str, Any]:
    """The post questionnaire of a participant who met every robot, in the listed order."""
    robots = [{"id": c.id, "name": c.robot} for c in protocol.conditions]
    return page(protocol, "post", None, robots=robots)


def words(post: dict[str, Any]) -> list[str]:
    """Every text of the post page: its title and text, each item's words and options, the
    pairwise items' ties and captions."""
    texts = [post["title"], post["text"]]
    for item in post["items"]:
        texts += [item["text"], *item.get("options", []), item.get("tie") or ""]
        texts += [pair["caption"] for pair in item.get("pairs", [])]
    return texts


def miscounts(protocol: Protocol) -> list[str]:
    """The post page's texts that count the robots otherwise than the participant met."""
    robots = len(protocol.conditions)
    return [text for text in words(post_page(protocol))
            if any(COUNTS[word.lower()] != robots for word in COUNTING.findall(text))]


@pytest.mark.parametrize("path", PROTOCOLS, ids=lambda path: path.stem)
def test_the_post_words_count_the_robots_met(path: Path):
    assert miscounts(load_protocol(path)) == []


def test_a_pairwise_item_fits_two_robots_and_three(tmp_path: Path):
    for path, robots in ((two_robots(tmp_path), 2), (THREE, 3),
                         (ROOT / "protocols" / "welfare.toml", 3)):
        protocol = load_protocol(path)
        assert len(protocol.conditions) == robots
        assert miscounts(protocol) == [], path.name
        [pairwise] = [item for item in post_page(protocol)["items"]
                      if item["kind"] == "pairwise"]
        names = {c.id: f"Robot {c.robot}" for c in protocol.conditions}
        assert [pair["caption"] for pair in pairwise["pairs"]] == [
            f"{names[pair['a']['id']]} – {names[pair['b']['id']]}"
            for pair in pairwise["pairs"]]
        assert len(pairwise["pairs"]) == robots * (robots - 1) // 2
