"""What each step shows: the protocol's texts, ready for the browser, and answer checks.

Templates stay generic: every word a participant reads comes from the protocol through
these functions, with robot names filled in.
"""

from __future__ import annotations

import re
from itertools import combinations
from typing import Any

from study.protocol.colours import ink_on
from study.protocol.loader import Item, Protocol, Questionnaire, Scale
from study.protocol.schema import MAX_CONDITIONS
from study.task.cookies import target
from study.web.console import holds
from study.web.participant import rounds, withdrawal
from study.web.participant.rejections import Rejected

# The journey: the steps before the collaborative sessions, then per session (one per
# condition) its robot's introduction, its rounds and its questionnaire, then the end.
BEFORE_SESSIONS = ("consent", "themes", "preferences", "practice", "lobby", "teammate")
AFTER_SESSIONS = ("post", "debrief", "done")
SESSION_STEP = re.compile(r"^(intro|session|questionnaire)-([1-9])$")
TERMINAL = ("done", "declined", "withdrawn", "unmatched", "dropped")
# Steps only a protocol with a [team] has (docs/teams.md).
TEAM_STEPS = ("lobby",)
ROUND_STEPS = {"practice": 0, **{f"session-{n}": n for n in range(1, MAX_CONDITIONS + 1)}}
# A pairwise answer that neither robot of the pair was better.
TIE = "="


# The experimenter's holds that have a page of their own (texts ``<hold>_title``, ``_text``).
HOLDS = ("paused", "aborted")


def journey_steps(sessions: int) -> tuple[str, ...]:
    """Every step of a journey through ``sessions`` collaborative sessions, in order."""
    middle = (f"{part}-{number}" for number in range(1, sessions + 1)
              for part in ("intro", "session", "questionnaire"))
    return (*BEFORE_SESSIONS, *middle, *AFTER_SESSIONS)


def steps_of(protocol: Protocol) -> tuple[str, ...]:
    """The steps a participant of this protocol goes through, in order (its progress bar)."""
    steps = journey_steps(protocol.sessions)
    return steps if protocol.team is not None else tuple(s for s in steps
                                                          if s not in TEAM_STEPS)


def progress(protocol: Protocol, step: str) -> dict[str, int]:
    """``state.progress``: how many of the journey's steps lie behind a participant, for the
    page's bar. A journey that has ended (done, declined, withdrawn...) has every step
    behind it, so its bar is full."""
    steps = steps_of(protocol)
    behind = len(steps) if step in TERMINAL or step not in steps else steps.index(step)
    return {"index": behind, "total": len(steps)}


def next_step(protocol: Protocol, step: str) -> str:
    """The step after ``step`` in this protocol's journey."""
    steps = steps_of(protocol)
    return steps[steps.index(step) + 1]


def session_number(step: str) -> int | None:
    """The collaborative session (1, 2, ...) a step belongs to, else None."""
    found = SESSION_STEP.match(step)
    return int(found.group(2)) if found else None


def session_label(protocol: Protocol, step: str) -> dict[str, int] | None:
    """``state.session``: the session a step belongs to and how many there are, for the
    page's "Session 2 of 3"."""
    number = session_number(step)
    return None if number is None else {"number": number, "of": protocol.sessions}


def robots_met(storage: Any, participant_id: int) -> list[dict[str, str]]:
    """The robots of the participant's collaborative sessions, in the order met (what a
    rank or pairwise item asks about)."""
    return [{"id": row["condition"], "name": row["robot"]} for row in storage.all(
        "SELECT condition, robot FROM sessions WHERE participant_id = ? AND "
        "kind = 'collaborative' ORDER BY number", (participant_id,))]


def robot_pairs(robots: list[dict[str, str]]) -> list[tuple[dict[str, str], dict[str, str]]]:
    """Every two robots, in the order met: (1, 2), (1, 3), (2, 3), ..."""
    return list(combinations(robots, 2))


def pair_key(first: dict[str, str], second: dict[str, str]) -> str:
    return f"{first['id']}|{second['id']}"


def pair_json(protocol: Protocol, first: dict[str, str], second: dict[str, str]
              ) -> dict[str, Any]:
    """One pair of a pairwise item: its key, its two robots, and its row's caption, the
    two robots' names in the protocol's words (``robot_name``)."""
    name = protocol.texts["robot_name"]
    return {"key": pair_key(first, second), "a": first, "b": second,
            "caption": " – ".join(name.replace("{robot}", robot["name"])
                                  for robot in (first, second))}


def fill(protocol: Protocol, text: str, robot: str | None) -> str:
    text = protocol.fill_robots(text)
    return text.replace("{robot}", robot) if robot else text


def scale_json(protocol: Protocol, scale: Scale) -> dict[str, Any]:
    return {"points": scale.points, "anchors": [protocol.fill_robots(a) for a in scale.anchors]}


def item_json(protocol: Protocol, item: Item, robot: str | None,
              robots: list[dict[str, str]] | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"id": item.id, "label": item.label, "kind": item.kind,
                           "text": fill(protocol, item.text, robot), "required": item.required}
    if item.kind == "rank":
        row["robots"] = robots or []
    if item.kind == "pairwise":
        row["pairs"] = [pair_json(protocol, a, b) for a, b in robot_pairs(robots or [])]
        row["tie"] = fill(protocol, item.tie, robot) if item.tie else None
    if item.scale is not None:
        row.update(scale_json(protocol, item.scale))
    if item.options:
        row["options"] = [fill(protocol, option, robot) for option in item.options]
    if item.kind == "number":
        row.update(min=item.minimum, max=item.maximum)
    if item.kind == "text":
        row["max_length"] = item.max_length
    return row


def questionnaire_of(protocol: Protocol, step: str) -> Questionnaire:
    return protocol.post_questionnaire if step == "post" else protocol.session_questionnaire


def page(protocol: Protocol, step: str, robot: str | None,
         transparency: str = "", team_page: str = "team",
         robots: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """The step's page: titles, texts and, where needed, themes, scales, items or the
    robot's transparency text (on its introduction). A real team's ``teammate`` step
    shows ``team_page``, the version that says who is in the person's team; rank and
    pairwise items ask about ``robots``, those the participant met."""
    if step == "preferences":
        return {"title": protocol.preference_title, "prompt": protocol.preference_prompt,
                "scale": scale_json(protocol, protocol.preference_scale),
                "themes": themes_json(protocol)}
    if step.startswith("questionnaire") or step == "post":
        questionnaire = questionnaire_of(protocol, step)
        return {"title": fill(protocol, questionnaire.title, robot),
                "text": fill(protocol, questionnaire.text, robot),
                "items": [item_json(protocol, item, robot, robots)
                          for item in questionnaire.items]}
    name = step.split("-")[0] if session_number(step) else step
    if step == "dropped":  # the page of a person whose seat an agent took over
        return {"title": protocol.texts["dropped_title"], "text": protocol.texts["dropped_text"]}
    if name == "teammate" and protocol.team is not None:
        name = team_page
    text = protocol.pages[name]
    result = {"title": fill(protocol, text.title, robot), "text": fill(protocol, text.text, robot)}
    if step == "themes":
        result["themes"] = themes_json(protocol)
    if robot:
        result["robot"] = robot
    if step.startswith("intro"):
        result["transparency"] = transparency
    return result


def status(protocol: Protocol, storage: Any, participant: dict[str, Any]) -> dict[str, Any]:
    """What the page shows besides the step: the experimenter's hold (with its page) and,
    on the final page, the token of the private link to withdraw later."""
    status_now = holds.status_of(storage, participant["id"])["status"]
    hold = status_now if status_now in HOLDS else None
    token = withdrawal.token_of(storage, participant["id"]) if participant["step"] == "done" \
        else None
    page = None if hold is None else {"title": protocol.texts[f"{hold}_title"],
                                      "text": protocol.texts[f"{hold}_text"]}
    return {"hold": hold, "hold_page": page, "withdraw_token": token}


def teammate_station(protocol: Protocol, storage: Any, row: dict[str, Any]) -> dict[str, Any]:
    """The teammate's cookie of a running round (what its station decorates) and its mean
    time per cookie (the pace of the cookie it will not finish before the deadline)."""
    teammate = storage.one("SELECT * FROM teammates WHERE participant_id = ?",
                           (row["participant_id"],))
    speed = rounds.teammate_decorator(protocol, teammate, row).speed(row["teammate_task_type"])
    return {"target": target(protocol, row["teammate_task_type"], row["teammate_theme"]),
            "cookie_seconds": 1.0 / speed}


def themes_json(protocol: Protocol) -> list[dict[str, Any]]:
    """The themes as the themes page shows them; which cookie carries each is said only
    when it is the same for everyone (``fixed``): by rating it is decided afterwards."""
    fixed = protocol.theme_assignment == "fixed"
    cookie_of = {c.theme: c.name for c in protocol.cookies} if fixed else {}
    return [{"id": t.id, "name": t.name, "text": t.text, "initials": t.initials,
             "description": t.description, "colour": t.colour, "ink": ink_on(t.colour),
             "cookie": cookie_of.get(t.id)}
            for t in protocol.themes]


def check_ratings(protocol: Protocol, data: dict[str, Any]) -> dict[str, int]:
    """Every theme rated on the preference scale, nothing else."""
    ratings = data.get("ratings")
    if not isinstance(ratings, dict):
        raise Rejected("malformed", "data.ratings must be an object")
    ids = {t.id for t in protocol.themes}
    if set(ratings) != ids:
        raise Rejected("invalid-answer", f"rate exactly the themes {sorted(ids)}")
    for theme, value in ratings.items():
        if not _is_whole(value) or not 1 <= value <= protocol.preference_scale.points:
            raise Rejected("invalid-answer", f"rating of {theme} must be 1..points")
    return ratings


def check_answers(protocol: Protocol, step: str, data: dict[str, Any], robot: str | None,
                  robots: list[dict[str, str]] | None = None,
                  ) -> list[tuple[Item, float | None, str | None]]:
    """Each item's answer as (item, number, text), checked against its kind and scale;
    rank and pairwise answers against ``robots``, those the participant met."""
    answers = data.get("answers")
    if not isinstance(answers, dict):
        raise Rejected("malformed", "data.answers must be an object")
    items = questionnaire_of(protocol, step).items
    unknown = set(answers) - {item.id for item in items}
    if unknown:
        raise Rejected("invalid-answer", f"unknown items {sorted(unknown)}")
    return [(item, *_check_item(protocol, item, answers.get(item.id), robot, robots or []))
            for item in items]


def _check_item(protocol: Protocol, item: Item, value: Any, robot: str | None,
                robots: list[dict[str, str]]) -> tuple[float | None, str | None]:
    if value is None or value == "" or (item.kind in ("rank", "pairwise") and not value):
        if item.required:
            raise Rejected("invalid-answer", f"{item.id} is required")
        return None, None
    if item.kind == "rank":
        return None, _check_rank(item, value, robots)
    if item.kind == "pairwise":
        return None, _check_pairs(item, value, robots)
    if item.kind == "likert":
        if not _is_whole(value) or not 1 <= value <= item.scale.points:  # type: ignore[union-attr]
            raise Rejected("invalid-answer", f"{item.id} must be a whole number on the scale")
        return float(value), None
    if item.kind == "choice":
        options = [fill(protocol, option, robot) for option in item.options]
        if value not in options:
            raise Rejected("invalid-answer", f"{item.id} must be one of {options}")
        return None, value
    if item.kind == "number":
        if (not isinstance(value, int | float) or isinstance(value, bool)
                or not item.minimum <= value <= item.maximum):  # type: ignore[operator]
            raise Rejected("invalid-answer", f"{item.id} must be a number in range")
        return float(value), None
    if not isinstance(value, str) or len(value) > item.max_length:
        raise Rejected("invalid-answer", f"{item.id} must be a text of at most "
                                         f"{item.max_length} characters")
    if item.required and not value.strip():
        raise Rejected("invalid-answer", f"{item.id} is required")
    return None, value


def _check_rank(item: Item, value: Any, robots: list[dict[str, str]]) -> str:
    """Every robot met, once each, first to last; stored as their condition ids joined by
    commas (``fair,fea,efficient``)."""
    ids = [robot["id"] for robot in robots]
    if (not isinstance(value, list) or not all(isinstance(v, str) for v in value)
            or sorted(value) != sorted(ids)):
        raise Rejected("invalid-answer", f"{item.id} must order every robot once: {ids}")
    return ",".join(value)


def _check_pairs(item: Item, value: Any, robots: list[dict[str, str]]) -> str:
    """One answer per pair of robots met: one of the two, or the tie where the item has
    one; stored pair by pair in the order asked, ``a>b`` (a was chosen) or ``a=b``, joined
    by semicolons (``efficient>fair;fea>efficient;fair=fea``)."""
    pairs = {pair_key(a, b): (a["id"], b["id"]) for a, b in robot_pairs(robots)}
    if not isinstance(value, dict) or set(value) != set(pairs):
        raise Rejected("invalid-answer", f"{item.id} must answer every pair: {list(pairs)}")
    tokens = []
    for key, (a, b) in pairs.items():
        chosen = value[key]
        if chosen == TIE and item.tie is not None:
            tokens.append(f"{a}{TIE}{b}")
        elif chosen in (a, b):
            tokens.append(f"{chosen}>{b if chosen == a else a}")
        else:
            raise Rejected("invalid-answer", f"{item.id}: {key} must be {a} or {b}"
                           + (f" or {TIE}" if item.tie is not None else ""))
    return ";".join(tokens)


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
