"""Every word a participant reads comes from the protocol: the German demo
(``protocols/demo-de.toml``) in real Chromium, from consent to done, shows none of the
page's default English texts (``study.protocol.texts.DEFAULT_TEXTS``) anywhere.

Each page's visible text is read, and every text the page puts on screen meanwhile (the
timer, toasts, counters) is recorded as it appears; also the front page, the experimenter's
pause, the withdrawal dialog, a questionnaire sent with missing answers, the private
withdrawal link and the study opened in another browser.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright
from support.browser import Participant, console_action
from support.web import CHROMIUM, CHROMIUM_ARGS

from study.bots.servers import ServeProcess, quick_protocol
from study.protocol.loader import load_protocol
from study.protocol.texts import DEFAULT_TEXTS, PLACEHOLDER

ROOT = Path(__file__).resolve().parents[3]
GERMAN = ROOT / "protocols" / "demo-de.toml"
pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Every text node the page adds or changes, shown or hidden for now, kept until the test
# collects it (the texts of scripts and styles are read by nobody).
RECORD_TEXTS = """
window.__seen = [];
const read = (text) => text.parentNode === null ||
  !["SCRIPT", "STYLE"].includes(text.parentNode.nodeName);
const textsOf = (node) => {
  if (node.nodeType === Node.TEXT_NODE) return read(node) ? [node.data] : [];
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) if (read(walker.currentNode)) texts.push(walker.currentNode.data);
  return texts;
};
new MutationObserver((records) => {
  for (const record of records) {
    const nodes = record.type === "characterData" ? [record.target] : record.addedNodes;
    for (const node of nodes) window.__seen.push(...textsOf(node));
  }
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def english_fragments() -> dict[str, re.Pattern[str]]:
    """The defaults' words as whole phrases: each default cut at its placeholders, every
    piece with at least two letters, matched as whole words and case by case."""
    fragments: dict[str, re.Pattern[str]] = {}
    for key, text in DEFAULT_TEXTS.items():
        if key == "language":
            continue
        for piece in PLACEHOLDER.split(text)[::2]:
            for part in piece.split("\n\n"):
                words = part.strip(" .,:;()!?—–-\n")
                if sum(char.isalpha() for char in words) >= 2:
                    fragments[words] = re.compile(rf"(?<!\w){re.escape(words)}(?!\w)")
    return fragments


class Reader(Participant):
    """The journey's participant, reading every page it reaches."""

    def __init__(self, page: Page, texts: dict[str, str]) -> None:
        super().__init__(page, None)
        self.texts = texts
        self.read: list[tuple[str, str]] = []

    def look(self, where: str) -> None:
        seen = self.page.evaluate("() => { const s = window.__seen || []; window.__seen = [];"
                                  " return s.join('\\n'); }")
        visible = self.page.evaluate("() => document.title + '\\n' + document.body.innerText")
        self.read.append((where, visible + "\n" + seen))

    def step(self, name: str, timeout: float = 60_000) -> None:
        super().step(name, timeout)
        self.look(name)

    def wait_count(self, number: int) -> None:
        self.page.wait_for_function(
            "(text) => (document.getElementById('my-count') || {}).textContent === text",
            arg=self.texts["finished"].replace("{count}", str(number)))
        self.look("a round")

    def play_round(self, step: str, cookies: int, shot: str | None = None) -> int:
        played = super().play_round(step, cookies, shot)
        self.look(f"{step} after a round")
        return played


def walk(you: Reader, page: Page, url: str) -> None:
    """The front page, then the study from consent to done, with a pause, the withdrawal
    dialog, missing answers and the private withdrawal link on the way."""
    page.goto(url)
    you.look("front page")
    page.goto(f"{url}/p/deutsch-1")
    you.reach_practice({"ravens": 2, "steelers": 6})
    console_action(_Live(url), page, "deutsch-1", "pause", "")
    page.wait_for_selector('[data-hold="paused"]')
    you.look("paused")
    console_action(_Live(url), page, "deutsch-1", "resume", "")
    page.wait_for_selector('[data-action="start-round"]')
    you.click("leave")
    page.wait_for_selector('[data-action="withdraw-cancel"]')
    you.look("withdrawal dialog")
    you.click("withdraw-cancel")
    for _ in range(4):
        you.play_round("practice", 1)
    you.step("teammate")
    you.click("continue")
    for session in (1, 2):
        you.step(f"intro-{session}")
        you.click("continue")
        for _ in (1, 2):
            you.play_round(f"session-{session}", 1)
        you.step(f"questionnaire-{session}")
        you.click("submit")
        page.wait_for_selector(".question-item.missing")
        you.look("missing answers")
        you.questionnaire(f"questionnaire-{session}", None)
    you.questionnaire("post", None)
    you.step("debrief")
    you.click("keep")
    you.step("done")
    page.goto(page.locator('[data-action="withdraw-later"]').get_attribute("href"))
    page.wait_for_selector('[data-withdraw="confirm"]')
    you.look("private withdrawal link")


class _Live:
    """What ``console_action`` needs of a served study: its address."""

    def __init__(self, url: str) -> None:
        self.url = url


@pytest.mark.minutes(2)
def test_the_german_demo_shows_no_default_english(tmp_path):
    # Rounds long enough for one cookie and a reading of every text on a busy machine; the
    # reference speeds are halved with the doubled rounds, so the capabilities stay the same.
    protocol = quick_protocol(GERMAN, tmp_path / "de.toml", round_seconds=12.0,
                              practice_seconds=12.0, reference_speed=(0.16, 0.034),
                              min_cookie_seconds=0.5)
    texts = load_protocol(protocol).texts
    server = ServeProcess(protocol, tmp_path / "study.sqlite", tmp_path / "pools",
                          tmp_path / "serve.log").start(timeout=180)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.add_init_script(RECORD_TEXTS)
            you = Reader(page, texts)
            walk(you, page, server.url)
            other = browser.new_page()  # another browser: the code is bound to the first
            other.add_init_script(RECORD_TEXTS)
            stranger = Reader(other, texts)
            other.goto(f"{server.url}/p/deutsch-1")
            other.wait_for_selector('[data-step="message"]')
            stranger.look("another browser")
            browser.close()
    finally:
        server.stop()
    read = you.read + stranger.read
    assert any(texts["finished"].replace("{count}", "1") in text for _, text in read)
    assert any(texts["other_browser_title"] in text for _, text in stranger.read)
    fragments = english_fragments()
    assert len(fragments) > 80
    found = [(where, words, text[max(0, match.start() - 40):match.end() + 40])
             for where, text in read for words, pattern in fragments.items()
             if (match := pattern.search(text))]
    assert found == [], "\n".join(map(str, found))
