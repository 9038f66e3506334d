"""A participant's hands and eyes in real Chromium, and what the browser tests check on a page."""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page

from study.people.speed import Human
from study.protocol.loader import load_protocol
from study.task.cookies import target
from support.web import DEMO, LiveServer

DEADLINE_MARGIN = 0.3  # seconds before the deadline a person's last move would arrive late
# A quick hand's cookie takes at least this long: more than any shipped protocol's shortest
# accepted cookie (1 s), so the server never refuses it as too fast on an idle machine.
QUICKEST_COOKIE_SECONDS = 1.2
# The progress bar's width eases to each step's value; a screenshot waits for it to arrive.
BAR_SETTLED = """() => Promise.all((document.getElementById("progress")?.getAnimations() ?? [])
  .map(animation => animation.finished))"""
# The participant's own cookie on the round's bakery (or any round's, for null): the
# letters in their slots, in order, or the iced boxes' cells; null without that bakery.
COOKIE_DRAWN = """(round) => {
  const bakery = document.querySelector(
    round === null ? ".bakery" : `.bakery[data-round="${round}"]`);
  const work = bakery && bakery.querySelector("#work");
  if (!work) return null;
  if (work.querySelector(".round-cookie"))
    return Array.from(work.querySelectorAll(".slot.filled"), (slot) => slot.textContent).join("");
  return Array.from(work.querySelectorAll(".box.iced"), (box) => Number(box.dataset.cell))
    .sort((a, b) => a - b);
}"""
# The centres of a letter's tile and of the cookie, the tray scrolled into view first (as
# Playwright's own scrolling does, centred if it is out of view); null if either is missing.
DRAG_SPOTS = """(letter) => {
  const tray = document.querySelector(".tray");
  const tile = document.querySelector(`.tray .tile[data-letter="${letter}"]`);
  const cookie = document.querySelector(".round-cookie");
  if (!tray || !tile || !cookie) return null;
  tray.scrollIntoViewIfNeeded(true);
  const centre = (node) => {
    const box = node.getBoundingClientRect();
    return [box.x + box.width / 2, box.y + box.height / 2];
  };
  return [centre(tile), centre(cookie)];
}"""
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
ROOT = Path(__file__).resolve().parents[2]
GRACE_SECONDS = 6  # a closed tab's seat goes to an agent after this, in short_teams3
TEAMS3_SEATS = 3
# Watches a team page from now on: the first moment the given teammates' stations each
# show one finished cookie (the count and one cookie on the plate), or the round has
# closed, it keeps whether the round still ran, how many stations were a person's, and
# what each of those teammates' showed. Kept in the page, so a busy machine's late
# question still gets what the page showed while the round ran.
WATCH_TEAMMATES = """([round, seats]) => {
  const look = () => {
    const running = document.querySelector(`.bakery[data-round="${round}"]`) !== null;
    const shown = seats.map((seat) => {
      const station = document.querySelector(`.station.theirs[data-kind=person]#seat${seat}`);
      return station && [station.querySelector(".finished > span").textContent,
                         station.querySelectorAll(".plate .done-cookie").length];
    });
    const done = shown.every((work) => work && work[0] === "Finished: 1" && work[1] === 1);
    const persons = document.querySelectorAll(".station.theirs[data-kind=person]").length;
    return (done || !running) && { running, persons, shown };
  };
  window.teammatesSeen = look();
  if (window.teammatesSeen) return;
  const watcher = new MutationObserver(() => {
    window.teammatesSeen = look();
    if (window.teammatesSeen) watcher.disconnect();
  });
  watcher.observe(document.body,
                  { subtree: true, childList: true, characterData: true, attributes: true });
}"""

# The robot's delivery played through in steps of 100 ms: where its kits or the robot
# itself would lie over the box of kits waiting, or a kit past the lane's end (each such
# moment and what).
ROBOT_LANE_UNCLEAR = """() => {
  const runner = document.getElementById("runner");
  const kits = document.querySelector(".robot-lane .fetch-station");
  if (!runner || !kits) return ["no robot lane"];
  const box = kits.getBoundingClientRect();
  const lane = runner.parentElement.getBoundingClientRect();
  runner.classList.remove("delivering");
  void runner.offsetWidth;  // restarts the delivery
  runner.classList.add("delivering");
  const [delivery] = runner.getAnimations();
  delivery.pause();
  const over = [];
  for (let at = 0; at <= delivery.effect.getTiming().duration; at += 100) {
    delivery.currentTime = at;
    for (const node of runner.querySelectorAll(".carried, .robot")) {
      const r = node.getBoundingClientRect();
      if (r.left < box.right && r.right > box.left && r.top < box.bottom && r.bottom > box.top)
        over.push(`${node.getAttribute("class")} at ${at} ms`);
      if (r.right > lane.right || r.left < lane.left)
        over.push(`${node.getAttribute("class")} cut off at ${at} ms`);
    }
  }
  delivery.finish();
  return over;
}"""


class Participant:
    """A participant's hands and eyes on the study page."""

    def __init__(self, page: Page, shots: Path | None) -> None:
        self.page = page
        self.shots = shots
        self.made: dict[str, int] = {}

    def shot(self, name: str | None) -> None:
        if self.shots is not None and name is not None:
            self.page.evaluate(BAR_SETTLED)
            self.page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)

    def robot_lane_unclear(self) -> list[str]:
        """Where the robot or a kit it carries would cover the kits waiting or be cut off
        at the lane's end, as it hands out a round's kits (none: the round's robot lane
        reads clearly throughout)."""
        return self.page.evaluate(ROBOT_LANE_UNCLEAR)

    def step(self, name: str, timeout: float = 30_000) -> None:
        self.page.wait_for_selector(f'[data-step="{name}"]', timeout=timeout)

    def click(self, action: str) -> None:
        self.page.click(f'[data-action="{action}"]:not([disabled])')

    def rate(self, item: str, value: int) -> None:
        self.page.click(f'[data-item="{item}"] .likert-point:nth-child({value}) .dot')

    def reach_practice(self, ratings: dict[str, int], shots: bool = False) -> None:
        """Consent, read the themes and rate them: every step before practice."""
        self.step("consent")
        self.shot("01-consent" if shots else None)
        self.click("agree")
        self.step("themes")
        self.shot("02-themes" if shots else None)
        self.click("continue")
        self.step("preferences")
        for theme, rating in ratings.items():
            self.rate(theme, rating)
        self.shot("03-preferences" if shots else None)
        self.click("continue")
        self.step("practice")

    def drag_letter(self, letter: str) -> None:
        """Drag the tile onto the cookie with the mouse. Where both are is asked in one call:
        on a busy machine each call to the browser takes a while, and a hand asking three
        times a letter did not finish a cookie of a 15-second round."""
        spots = self.page.evaluate(DRAG_SPOTS, letter)
        if spots is None:  # the round closed under the hand, or the page is wrong
            raise PlaywrightError(f"no {letter} tile or no cookie to drag it onto")
        (tile_x, tile_y), (cookie_x, cookie_y) = spots
        self.page.mouse.move(tile_x, tile_y)
        self.page.mouse.down()
        self.page.mouse.move(cookie_x, cookie_y, steps=4)
        self.page.mouse.up()

    def decorate(self, shot: str | None = None) -> None:
        """Finish one cookie of whatever kind is on the station (a screenshot half-way),
        quickly, but never sooner than ``QUICKEST_COOKIE_SECONDS``."""
        started = time.monotonic()
        if self.page.locator(".round-cookie").count():
            letters = self.page.locator(".round-cookie").get_attribute("data-target")
            moves = [lambda letter=letter: self.drag_letter(letter)
                     for letter in letters.replace(" ", "")]
        else:
            moves = [box.click for box in self.page.locator(".box.guide").all()]
        for number, move in enumerate(moves):
            if shot and number == len(moves) // 2:
                self.shot(shot)
            if number == len(moves) - 1:  # the move that finishes the cookie
                time.sleep(max(0.0, started + QUICKEST_COOKIE_SECONDS - time.monotonic()))
            move()

    def play_round(self, step: str, cookies: int, shot: str | None = None,
                   may_close_early: bool = False) -> int:
        """Start the next round, finish ``cookies`` cookies, wait for the round to close.
        ``may_close_early``: the round's clock may close it under the hand on a busy
        machine, as for a slow person, and the hand then stops where it is."""
        self.step(step)
        self.click("start-round")
        self.page.wait_for_selector(".bakery .cookie")
        round_id = self.page.locator(".bakery").get_attribute("data-round")
        for number in range(1, cookies + 1):
            try:
                self.decorate(shot if number == 1 else None)
                self.wait_count(number)
            except PlaywrightError:
                if may_close_early and not self.running(round_id):
                    break
                raise
        self.page.wait_for_selector(f'.bakery[data-round="{round_id}"]', state="detached",
                                    timeout=30_000)
        return int(round_id)

    def running(self, round_id: str | None) -> bool:
        """Whether the page still shows the round (its clock may have closed it)."""
        return self.page.locator(f'.bakery[data-round="{round_id}"]').count() > 0

    def wait_count(self, number: int) -> None:
        self.page.wait_for_function(
            "(text) => (document.getElementById('my-count') || {}).textContent === text",
            arg=f"Finished: {number}")

    def questionnaire(self, step: str, shot: str | None,
                      text: str = "The robot gave us each the cookies we did best.") -> None:
        self.step(step)
        for item in self.page.locator(".question-item").all():
            if item.locator(".likert").count():
                item.locator(".likert-point").nth(4).locator(".dot").click()
            elif item.locator(".choice").count():
                item.locator(".choice").first.click()
            elif item.locator("input.number").count():
                item.locator("input.number").fill("34")
            else:
                item.locator("textarea").fill(text)
        self.shot(shot)
        self.click("submit")


def screenshot_directory(tmp_path: Path) -> Path:
    directory = Path(os.environ.get("STUDY_SCREENSHOTS") or tmp_path / "shots")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


class HumanHands(Participant):
    """A participant whose every move is timed by the human model."""

    def __init__(self, page: Page, human: Human, seed: int, protocol: Path = DEMO) -> None:
        super().__init__(page, None)
        self.human = human
        self.rng = np.random.default_rng(seed)
        self.protocol = load_protocol(protocol)
        self.themes: tuple[str, ...] | None = None  # as assigned after the ratings
        self.moves: Counter[int] = Counter()  # elements placed or taken off, by round id
        self.unseen: Counter[int] = Counter()  # moves whose round left the page at once

    def play_human_round(self, step: str, margin: float = DEADLINE_MARGIN) -> int:
        """Start the next round, decorate at the model's pace until just before the
        deadline, wait for the server to close the round."""
        self.step(step)
        self.click("start-round")
        return self.decorate_running_round(margin)

    def decorate_running_round(self, margin: float = DEADLINE_MARGIN) -> int:
        """Decorate the round on the station at the model's pace until ``margin`` s before
        its deadline (a real team's rounds are started by the server), wait for it to
        close."""
        round_id = self._decorate_at_pace(margin)
        self.page.wait_for_selector(f'.bakery[data-round="{round_id}"]', state="detached",
                                    timeout=30_000)
        return int(round_id)

    def decorate_one_cookie(self, margin: float = DEADLINE_MARGIN) -> None:
        """Finish one cookie of the running round at the model's pace, and stop (a hand
        clicking as fast as Chromium can finishes it sooner than the protocol's shortest
        cookie, and the server rightly refuses it)."""
        self._decorate_at_pace(margin, cookies=1)

    def _decorate_at_pace(self, margin: float, cookies: int | None = None) -> str:
        """The model's moves on the running round, each at its moment, until ``margin`` s
        before the deadline or ``cookies`` finished; the round's id."""
        self.page.wait_for_selector(".bakery .cookie", timeout=60_000)
        started = time.time()
        bakery = self.page.locator(".bakery")
        round_id, deadline = bakery.get_attribute("data-round"), float(
            bakery.get_attribute("data-deadline"))
        letters = self.page.locator(".round-cookie").count() > 0
        task_type = 1 if letters else 0
        cookie = target(self.protocol, task_type,
                        self.themes[task_type] if self.themes else None)
        previous: Any = "" if letters else []
        for action in self.human.round_actions(cookie, deadline - started, self.rng):
            time.sleep(max(0.0, started + action.at - time.time()))
            if time.time() >= deadline - margin:
                break
            try:
                if letters:
                    self.letters_move(previous, action.content)
                else:
                    self.squares_move(previous, action.content)
            except PlaywrightError:
                if self.running(round_id):
                    raise
                break  # on a busy machine the round closed under the person's hand, as it may
            if not action.finished:
                taken = self.took(round_id, action.content)
                if taken is None:
                    self.unseen[int(round_id)] += 1
                elif taken:
                    self.moves[int(round_id)] += 1
            previous = ("" if letters else []) if action.finished else action.content
            if action.finished and cookies is not None:
                cookies -= 1
                if cookies == 0:
                    break
        return str(round_id)

    def drawn(self, round_id: str | None = None) -> Any:
        """The participant's cookie as the page shows it: letters in their slots, in
        order, or the iced boxes; None once the round (``round_id``, or any) has left the
        page."""
        return self.page.evaluate(COOKIE_DRAWN, round_id)

    def took(self, round_id: str, content: Any) -> bool | None:
        """Whether the page took the move that makes its cookie ``content``: once its clock
        passes the deadline it stops the cookie, and a late click changes nothing. None if
        the server closed the round meanwhile and the page dropped it: not seen."""
        drawn = self.drawn(round_id)
        return None if drawn is None else drawn == (
            content if isinstance(content, str) else sorted(content))

    def letters_move(self, before: str, after: str) -> None:
        if not before:
            self.page.wait_for_selector(".slot.filled", state="detached")
        if len(after) > len(before):
            self.drag_letter(after[-1])
        else:
            self.page.locator(".slot").nth(len(after)).click()

    def squares_move(self, before: list[int], after: list[int]) -> None:
        if not before:
            self.page.wait_for_selector(".box.iced", state="detached")
        [cell] = set(after) ^ set(before)
        self.page.click(f'.box[data-cell="{cell}"]')


def reach_the_teammate(you: HumanHands, page: Page, url: str, code: str) -> list[int]:
    page.goto(f"{url}/p/{code}")
    you.reach_practice({"ravens": 6, "steelers": 2})
    return [you.play_human_round("practice") for _ in range(4)]


def agent_teammate_shown(page: Page) -> dict[str, Any]:
    """How the page presents the agent teammate of an individual study: the figure drawn
    (``#agent`` or ``#baker``) and the words, on the teammate page or at its station."""
    return page.evaluate("""() => {
      const hello = document.querySelector(".teammate-hello");
      const station = document.querySelector("#teammate");
      const node = hello || station;
      return node && {figure: node.querySelector("use").getAttribute("href"),
                      words: (hello ? hello.querySelector("p") : station.querySelector("h3"))
                        .textContent.trim()};
    }""")


def websocket_handshakes(page: Page) -> dict[str, dict[str, dict[str, str]]]:
    """Every websocket the page opens from now on, by URL: the headers Chromium sent and
    the ones the server answered, names in lower case (from the DevTools protocol)."""
    seen: dict[str, dict[str, dict[str, str]]] = {}
    urls: dict[str, str] = {}
    devtools = page.context.new_cdp_session(page)
    devtools.send("Network.enable")

    def lower(headers: dict[str, str]) -> dict[str, str]:
        return {name.lower(): value for name, value in headers.items()}

    def created(event: dict[str, Any]) -> None:
        urls[event["requestId"]] = event["url"]

    def asked(event: dict[str, Any]) -> None:
        seen.setdefault(urls[event["requestId"]], {})["sent"] = lower(
            event["request"]["headers"])

    def answered(event: dict[str, Any]) -> None:
        seen.setdefault(urls[event["requestId"]], {})["answered"] = lower(
            event["response"]["headers"])

    devtools.on("Network.webSocketCreated", created)
    devtools.on("Network.webSocketWillSendHandshakeRequest", asked)
    devtools.on("Network.webSocketHandshakeResponseReceived", answered)
    return seen


def stored(server: LiveServer, sql: str, *params: Any) -> list[sqlite3.Row]:
    db = sqlite3.connect(server.app.extensions["study"].storage.path)
    db.row_factory = sqlite3.Row
    return db.execute(sql, params).fetchall()


def assert_only_slow_refusals(server: LiveServer, participant_id: int) -> None:
    """Whether the page sent only what the server accepts, but for what a slow machine
    brings a person on a slow line too: a move begun ``DEADLINE_MARGIN`` before a deadline
    that arrives after it (refused as late), and a message sent again after an ack slower
    than the page's timeout (answered as a duplicate). A failure names what was refused."""
    refused = [tuple(row) for row in stored(
        server, "SELECT event, reason, detail FROM rejections WHERE participant_id = ?",
        participant_id)]
    slow = [row for row in refused if row[1] in ("round-closed", "duplicate")]
    assert refused == slow
    assert {event for event, _, _ in slow} <= {"progress", "cookie"}, slow


def frame_styles(page: Page) -> dict[str, str]:
    """How the study's frame is drawn (the stylesheet's, not the browser's defaults): the
    card heading's font, the sign's colour, the card's border."""
    return page.evaluate("""() => ({
        heading: getComputedStyle(document.querySelector("main .card h2")).fontFamily,
        sign: getComputedStyle(document.querySelector("header.sign")).backgroundColor,
        border: getComputedStyle(document.querySelector("main .card")).borderTopWidth})""")


def assert_fits(page: Page, where: str) -> None:
    """No horizontal overflow, and every scale, theme card and button inside the screen."""
    width = page.evaluate("document.documentElement.scrollWidth")
    inner = page.evaluate("innerWidth")
    assert width <= inner, f"{where}: page is {width} px wide on a {inner} px screen"
    outside = page.evaluate("""() => [...document.querySelectorAll(
        '.likert, .theme, .button, .question-item, .station, .confirm-card')]
        .filter((node) => node.offsetParent !== null)
        .map((node) => node.getBoundingClientRect())
        .filter((box) => box.left < -0.5 || box.right > innerWidth + 0.5).length""")
    assert outside == 0, f"{where}: {outside} elements reach outside the screen"


def console_action(live: LiveServer, page: Page, code: str, action: str, note: str) -> None:
    """What the experimenter's console button sends (the console runs in demo mode here)."""
    api = page.context.request
    csrf = re.search(r'name="csrf_token" value="([^"]+)"',
                     api.get(f"{live.url}/console/").text()).group(1)
    reply = api.post(f"{live.url}/console/participants/{code}",
                     form={"action": action, "note": note, "csrf_token": csrf},
                     headers={"Accept": "application/json"})
    assert reply.ok, reply.text()


def short_teams3(directory: Path) -> Path:
    """teams3 made short: two rounds a session (kits [3, 3]), short practice rounds, a
    four-letter letters cookie, open enrolment, and teams3's FEA bounds kept on purpose for
    the smaller pool. A team round keeps teams3's 30 s: in one, three people finish a cookie
    each, one after another, on a machine busy with other tests."""
    text = (ROOT / "protocols" / "teams3.toml").read_text(encoding="utf-8")
    for pattern, value in ((r"(?m)^kits = \[9, 9\]", "kits = [3, 3]"),
                           (r"(?m)^practice_seconds = \d+", "practice_seconds = 6"),
                           (r"(?m)^min_cookie_seconds = [\d.]+", "min_cookie_seconds = 0.2"),
                           (r"(?m)^grace_seconds = \d+", f"grace_seconds = {GRACE_SECONDS}"),
                           (r"(?m)^break_seconds = \d+", "break_seconds = 2"),
                           (r"(?m)^open_enrolment = false", "open_enrolment = true"),
                           # four letters to drag, not ten: a busy machine's hand is slow
                           (r'(?m)^text = "GO STEELERS"', 'text = "GO PA"'),
                           # shorter sessions make another pool: teams3's bounds, kept
                           (r"(?m)^(bounds_source = .*)$", r"\1\nbounds_fixed = true")):
        text, count = re.subn(pattern, value, text)
        assert count >= 1, pattern
    path = directory / "teams3.toml"
    path.write_text(text, encoding="utf-8")
    return path


def one_initial_teams3(directory: Path, break_seconds: float | None = None) -> Path:
    """``short_teams3`` with a squares cookie of one initial (ten boxes, not twenty): in
    the first team round three people finish a cookie each, one after another, inside its
    30 s, and on a machine busy with other browser tests twenty clicks a cookie could take
    it all (three identical practices make that round squares for everyone); with
    ``break_seconds``, that break between team rounds instead of the short one."""
    path = short_teams3(directory)
    text = path.read_text(encoding="utf-8")
    assert text.count('initials = "BR"') == 1
    text = text.replace('initials = "BR"', 'initials = "B"')
    if break_seconds is not None:
        text, breaks = re.subn(r"(?m)^break_seconds = \d+", f"break_seconds = {break_seconds:g}",
                               text)
        assert breaks == 1
    path.write_text(text, encoding="utf-8")
    return path


def three_people(browser: Any, shots: Path | None) -> tuple[Participant, Participant,
                                                            Participant]:
    """Ada and Bo on desktops, Cy on a phone: a team of three, each in a browser of their
    own."""
    contexts = [browser.new_context(viewport=DESKTOP), browser.new_context(viewport=PHONE),
                browser.new_context(viewport=DESKTOP)]
    ada, cy, bo = (Participant(context.new_page(), shots) for context in contexts)
    return ada, cy, bo


def practise(person: Participant, url: str, code: str) -> None:
    person.page.goto(f"{url}/p/{code}")
    person.reach_practice({"ravens": 6, "steelers": 2})
    for _ in range(4):
        person.play_round("practice", 1, may_close_early=True)


def running_round(person: Participant) -> str:
    person.page.wait_for_selector(".bakery .cookie", timeout=60_000)
    return person.page.locator(".bakery").get_attribute("data-round") or ""


def play_team_round(people: list[Participant], shot: str | None = None,
                    persons: int | None = None) -> None:
    """Every present person finishes one cookie, and every page shows it at that person's
    station while the round still runs; then the round closes for them all. ``persons``:
    the person stations a page shows, by default the others of ``people`` (more in the
    round in which an absent person's seat is not yet an agent's)."""
    rounds = [running_round(person) for person in people]
    seats = [own_seat(person) for person in people]
    for person, round_id, seat in zip(people, rounds, seats, strict=True):
        person.page.evaluate(WATCH_TEAMMATES,
                             [round_id, [other for other in seats if other != seat]])
    for number, person in enumerate(people):
        person.decorate(f"{shot}-{number}" if shot else None)
        person.wait_count(1)
    for person, seat in zip(people, seats, strict=True):
        others = [other for other in seats if other != seat]
        seen = person.page.wait_for_function("() => window.teammatesSeen",
                                             timeout=60_000).json_value()
        assert seen == {"running": True,
                        "persons": len(others) if persons is None else persons,
                        "shown": [["Finished: 1", 1]] * len(others)}, seen
    for person, round_id in zip(people, rounds, strict=True):
        person.page.wait_for_selector(f'.bakery[data-round="{round_id}"]', state="detached",
                                      timeout=60_000)


def own_seat(person: Participant) -> int:
    """A team page shows every seat's station but its own among the teammates'."""
    theirs = person.page.locator(".station.theirs").evaluate_all(
        "(stations) => stations.map((station) => station.id)")
    mine = [seat for seat in range(TEAMS3_SEATS) if f"seat{seat}" not in theirs]
    assert len(theirs) == TEAMS3_SEATS - 1 and len(mine) == 1, theirs
    return mine[0]
