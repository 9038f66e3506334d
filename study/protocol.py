"""The study protocol: one declarative TOML file per study, validated on load.

Every text a participant reads (consent, theme information, questionnaire items, robot
names, transparency texts) lives in the protocol, so a study is changed by editing one file
and the templates stay generic. Errors name the file, the line and the field. The ``[pool]``
table belongs to ``study.pool`` and is only handed over to ``PoolSpec``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from study.model import ALGORITHMS, InvalidInput, validate_kits
from study.tomlsource import ProtocolError, TomlSource

TASK_NAMES = ("squares", "letters")
ROUND_ORDERS = ("default", "anytime-fair")
ITEM_KINDS = ("likert", "choice", "number", "text")
CONDITION_ORDERS = ("alternate", "fixed")
PAGES = ("consent", "themes", "practice", "teammate", "intro", "session", "debrief", "done",
         "declined", "withdrawn", "unmatched")
IDENTIFIER = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
ROBOT_PLACEHOLDER = re.compile(r"\{robot:([a-z][a-z0-9_-]*)\}")


@dataclass(frozen=True)
class Theme:
    """A decoration theme: ``text`` is spelled on letters cookies, ``initials`` drawn on
    squares cookies."""

    id: str
    name: str
    text: str
    initials: str
    description: str
    colour: str


@dataclass(frozen=True)
class CookieType:
    """A task type: the theme decorated on it and the speed that counts as capability 1."""

    task_type: int
    name: str
    theme: str
    reference_speed: float


@dataclass(frozen=True)
class Condition:
    """One robot: the allocation algorithm it runs and how it is presented."""

    id: str
    algorithm: str
    robot: str
    transparency: str
    round_order: str = "default"
    w: float = 0.7
    fea_bounds: tuple[float, float] | None = None  # None: take the pool's bounds


@dataclass(frozen=True)
class Scale:
    points: int
    anchors: tuple[str, ...]


@dataclass(frozen=True)
class Item:
    """A questionnaire item; ``options`` only for choices, ``minimum/maximum`` for numbers."""

    id: str
    label: str
    text: str
    kind: str
    required: bool = True
    scale: Scale | None = None
    options: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    max_length: int = 2000


@dataclass(frozen=True)
class Questionnaire:
    title: str
    text: str
    items: tuple[Item, ...]


@dataclass(frozen=True)
class Page:
    title: str
    text: str


@dataclass(frozen=True)
class Protocol:
    """A validated study protocol."""

    path: Path
    name: str
    title: str
    kits: tuple[int, ...]
    round_seconds: float
    practice_seconds: float
    practice: tuple[int, ...]
    condition_order: str
    open_enrolment: bool
    min_cookie_seconds: float
    cookies: tuple[CookieType, ...]
    themes: tuple[Theme, ...]
    conditions: tuple[Condition, ...]
    pages: dict[str, Page]
    preference_scale: Scale
    preference_title: str
    preference_prompt: str
    session_questionnaire: Questionnaire
    post_questionnaire: Questionnaire
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        """Collaborative rounds per session: every human gets one kit a round (two humans)."""
        return sum(self.kits) // 2

    def theme(self, theme_id: str) -> Theme:
        return next(t for t in self.themes if t.id == theme_id)

    def condition(self, condition_id: str) -> Condition:
        return next(c for c in self.conditions if c.id == condition_id)

    def theme_of(self, task_type: int) -> Theme:
        return self.theme(self.cookies[task_type].theme)

    def measured_practice_rounds(self) -> dict[int, int]:
        """Task type -> the practice round (1-based) that measures it: its second round."""
        seen: dict[int, list[int]] = {}
        for number, task_type in enumerate(self.practice, start=1):
            seen.setdefault(task_type, []).append(number)
        return {task_type: numbers[1] for task_type, numbers in seen.items()}

    def fill_robots(self, text: str) -> str:
        """Replace ``{robot:<condition id>}`` with that condition's robot name."""
        names = {c.id: c.robot for c in self.conditions}
        return ROBOT_PLACEHOLDER.sub(lambda m: names.get(m.group(1), m.group(0)), text)

    def pool_spec(self) -> Any:
        """The ``[pool]`` section as ``study.pool.PoolSpec`` reads it."""
        from study.pool import PoolSpec

        return PoolSpec.from_protocol(self.path)


def load_protocol(path: Path | str) -> Protocol:
    """Read and validate a protocol file; raises ``ProtocolError`` naming line and field."""
    return _Reader(TomlSource.read(path)).protocol()


def parse_protocol(text: str, path: Path | str = "<protocol>") -> Protocol:
    """Validate protocol text (tests and tools that hold the text in memory)."""
    return _Reader(TomlSource.parse(text, path)).protocol()


_MISSING = object()


class _Reader:
    """Walks the TOML document, checking each field and naming it when it is wrong."""

    def __init__(self, source: TomlSource) -> None:
        self.source = source

    def fail(self, dotted: str, message: str) -> ProtocolError:
        return self.source.error(dotted, message)

    def get(self, table: dict[str, Any], dotted: str, key: str, kind: type | tuple[type, ...],
            default: Any = _MISSING) -> Any:
        """``table[key]`` checked against ``kind``; ``dotted`` names it in errors."""
        where = f"{dotted}.{key}" if dotted else key
        if key not in table:
            if default is _MISSING:
                raise self.fail(where, "is required")
            return default
        value = table[key]
        if kind in (float, (int, float)) and isinstance(value, int) and not isinstance(
                value, bool):
            value = float(value)
        if isinstance(value, bool) and kind is not bool:
            raise self.fail(where, f"must be {_kind_name(kind)}, not a boolean")
        if not isinstance(value, kind):
            raise self.fail(where, f"must be {_kind_name(kind)}")
        if isinstance(value, str) and not value.strip() and default is _MISSING:
            raise self.fail(where, "must not be empty")
        return value

    def number(self, table: dict[str, Any], dotted: str, key: str, low: float,
               high: float = float("inf"), default: Any = _MISSING) -> float:
        value = self.get(table, dotted, key, float, default)
        if not low < value <= high:
            bound = f"at most {high:g}" if high != float("inf") else "finite"
            raise self.fail(f"{dotted}.{key}", f"must be above {low:g} and {bound}")
        return value

    def table(self, parent: dict[str, Any], dotted: str, key: str) -> dict[str, Any]:
        return self.get(parent, dotted, key, dict)

    def identifier(self, table: dict[str, Any], dotted: str) -> str:
        value = self.get(table, dotted, "id", str)
        if not IDENTIFIER.match(value):
            raise self.fail(f"{dotted}.id", "must be lower-case letters, digits, '-' or '_', "
                                            "starting with a letter")
        return value

    # --- sections ---------------------------------------------------------------------

    def protocol(self) -> Protocol:
        data = self.source.data
        study = self.table(data, "", "study")
        themes = self.themes(data)
        cookies = self.cookies(data, {t.id for t in themes})
        conditions = self.conditions(data)
        scales = self.scales(data)
        return Protocol(
            path=self.source.path,
            name=self.get(study, "study", "name", str),
            title=self.get(study, "study", "title", str),
            kits=self.kits(study),
            round_seconds=self.number(study, "study", "round_seconds", 0, 3600),
            practice_seconds=self.number(study, "study", "practice_seconds", 0, 3600),
            practice=self.practice(study),
            condition_order=self.choice(study, "study", "condition_order", CONDITION_ORDERS,
                                        "alternate"),
            open_enrolment=self.get(study, "study", "open_enrolment", bool, True),
            min_cookie_seconds=self.get(study, "study", "min_cookie_seconds", float, 0.5),
            cookies=cookies,
            themes=themes,
            conditions=conditions,
            pages=self.pages(data),
            preference_scale=self.scale_ref(self.table(data, "", "preferences"), "preferences",
                                            scales),
            preference_title=self.get(data["preferences"], "preferences", "title", str),
            preference_prompt=self.get(data["preferences"], "preferences", "prompt", str),
            session_questionnaire=self.questionnaire(data, "session", scales, conditions),
            post_questionnaire=self.questionnaire(data, "post", scales, conditions),
        )

    def choice(self, table: dict[str, Any], dotted: str, key: str, allowed: tuple[str, ...],
               default: Any = _MISSING) -> str:
        value = self.get(table, dotted, key, str, default)
        if value not in allowed:
            raise self.fail(f"{dotted}.{key}", f"must be one of {', '.join(allowed)}")
        return value

    def kits(self, study: dict[str, Any]) -> tuple[int, ...]:
        kits = self.get(study, "study", "kits", list)
        try:
            values = validate_kits(kits, 2)
        except InvalidInput as error:
            raise self.fail("study.kits", str(error)) from None
        if len(values) != len(TASK_NAMES):
            raise self.fail("study.kits", "must give kits for squares and letters")
        return values

    def practice(self, study: dict[str, Any]) -> tuple[int, ...]:
        names = self.get(study, "study", "practice", list)
        if any(name not in TASK_NAMES for name in names):
            raise self.fail("study.practice", f"each round must be one of {', '.join(TASK_NAMES)}")
        types = tuple(TASK_NAMES.index(name) for name in names)
        for task_type, name in enumerate(TASK_NAMES):
            if types.count(task_type) < 2:
                raise self.fail("study.practice", f"needs at least two {name} rounds: the "
                                                  "second one measures the capability")
        return types

    def themes(self, data: dict[str, Any]) -> tuple[Theme, ...]:
        rows = self.get(data, "", "themes", list)
        themes = []
        for index, row in enumerate(rows):
            dotted = f"themes.{index}"
            if not isinstance(row, dict):
                raise self.fail("themes", "must be [[themes]] tables")
            initials = self.get(row, dotted, "initials", str)
            if not re.fullmatch(r"[A-Za-z0-9!]{1,4}", initials):
                raise self.fail(f"{dotted}.initials", "must be 1 to 4 letters, digits or '!'")
            text = self.get(row, dotted, "text", str)
            if not re.search(r"[A-Za-z0-9]", text) or len(text) > 24:
                raise self.fail(f"{dotted}.text", "must hold letters and be at most 24 long")
            themes.append(Theme(
                id=self.identifier(row, dotted), name=self.get(row, dotted, "name", str),
                text=text, initials=initials.upper(),
                description=self.get(row, dotted, "description", str),
                colour=self.colour(row, dotted)))
        ids = [t.id for t in themes]
        if len(set(ids)) != len(ids):
            raise self.fail("themes", "theme ids must be unique")
        return tuple(themes)

    def colour(self, row: dict[str, Any], dotted: str) -> str:
        value = self.get(row, dotted, "colour", str, "#8b4513")
        if not re.fullmatch(r"#[0-9a-fA-F]{6}", value):
            raise self.fail(f"{dotted}.colour", "must be a colour like #8b4513")
        return value

    def cookies(self, data: dict[str, Any], theme_ids: set[str]) -> tuple[CookieType, ...]:
        section = self.table(data, "", "cookies")
        cookies = []
        for task_type, name in enumerate(TASK_NAMES):
            row = self.table(section, "cookies", name)
            dotted = f"cookies.{name}"
            theme = self.get(row, dotted, "theme", str)
            if theme not in theme_ids:
                known = ", ".join(sorted(theme_ids))
                raise self.fail(f"{dotted}.theme", f"names no theme ({known})")
            cookies.append(CookieType(task_type, name, theme,
                                      self.number(row, dotted, "reference_speed", 0, 100)))
        return tuple(cookies)

    def conditions(self, data: dict[str, Any]) -> tuple[Condition, ...]:
        rows = self.get(data, "", "conditions", list)
        if len(rows) != 2:
            raise self.fail("conditions", "a study compares exactly two conditions")
        conditions = []
        for index, row in enumerate(rows):
            dotted = f"conditions.{index}"
            conditions.append(Condition(
                id=self.identifier(row, dotted),
                algorithm=self.choice(row, dotted, "algorithm", ALGORITHMS),
                robot=self.get(row, dotted, "robot", str),
                transparency=self.get(row, dotted, "transparency", str, ""),
                round_order=self.choice(row, dotted, "round_order", ROUND_ORDERS, "default"),
                w=self.number(row, dotted, "w", -1e-12, 1.0, 0.7),
                fea_bounds=self.bounds(row, dotted)))
        if conditions[0].id == conditions[1].id:
            raise self.fail("conditions.1.id", "condition ids must differ")
        return tuple(conditions)

    def bounds(self, row: dict[str, Any], dotted: str) -> tuple[float, float] | None:
        value = row.get("fea_bounds", "pool")
        if value == "pool":
            return None
        if (not isinstance(value, list) or len(value) != 2
                or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
                or not value[0] < value[1]):
            raise self.fail(f"{dotted}.fea_bounds", 'must be "pool" or [lo, hi] with lo < hi')
        return float(value[0]), float(value[1])

    def pages(self, data: dict[str, Any]) -> dict[str, Page]:
        section = self.table(data, "", "pages")
        pages = {}
        for name in PAGES:
            row = self.table(section, "pages", name)
            pages[name] = Page(self.get(row, f"pages.{name}", "title", str),
                               self.get(row, f"pages.{name}", "text", str))
        return pages

    def scales(self, data: dict[str, Any]) -> dict[str, Scale]:
        section = self.table(data, "", "scales")
        scales = {}
        for name, row in section.items():
            dotted = f"scales.{name}"
            if not isinstance(row, dict):
                raise self.fail(dotted, "must be a table")
            points = self.get(row, dotted, "points", int)
            if not 2 <= points <= 11:
                raise self.fail(f"{dotted}.points", "must be between 2 and 11")
            anchors = self.get(row, dotted, "anchors", list)
            if not anchors or not all(isinstance(a, str) for a in anchors):
                raise self.fail(f"{dotted}.anchors", "must be a list of texts")
            scales[name] = Scale(points, tuple(anchors))
        return scales

    def scale_ref(self, row: dict[str, Any], dotted: str, scales: dict[str, Scale]) -> Scale:
        name = self.get(row, dotted, "scale", str)
        if name not in scales:
            raise self.fail(f"{dotted}.scale", f"names no scale ({', '.join(sorted(scales))})")
        return scales[name]

    def questionnaire(self, data: dict[str, Any], name: str, scales: dict[str, Scale],
                      conditions: tuple[Condition, ...]) -> Questionnaire:
        section = self.table(self.table(data, "", "questionnaires"), "questionnaires", name)
        dotted = f"questionnaires.{name}"
        rows = self.get(section, dotted, "items", list)
        if not rows:
            raise self.fail(f"{dotted}.items", "needs at least one item")
        items = tuple(self.item(row, f"{dotted}.items.{index}", scales, conditions)
                      for index, row in enumerate(rows))
        ids = [item.id for item in items]
        if len(set(ids)) != len(ids):
            raise self.fail(f"{dotted}.items", "item ids must be unique")
        return Questionnaire(self.get(section, dotted, "title", str),
                             self.get(section, dotted, "text", str, ""), items)

    def item(self, row: dict[str, Any], dotted: str, scales: dict[str, Scale],
             conditions: tuple[Condition, ...]) -> Item:
        kind = self.choice(row, dotted, "kind", ITEM_KINDS)
        common = {"id": self.identifier(row, dotted),
                  "label": self.get(row, dotted, "label", str, ""),
                  "text": self.get(row, dotted, "text", str),
                  "kind": kind,
                  "required": self.get(row, dotted, "required", bool, kind != "text")}
        if kind == "likert":
            return Item(**common, scale=self.scale_ref(row, dotted, scales))
        if kind == "choice":
            options = self.get(row, dotted, "options", list)
            if len(options) < 2 or not all(isinstance(o, str) and o for o in options):
                raise self.fail(f"{dotted}.options", "must list at least two texts")
            names = {c.id for c in conditions}
            for option in options:
                for ref in ROBOT_PLACEHOLDER.findall(option):
                    if ref not in names:
                        raise self.fail(f"{dotted}.options", f"{{robot:{ref}}} names no condition")
            return Item(**common, options=tuple(options))
        if kind == "number":
            minimum = self.get(row, dotted, "min", float)
            maximum = self.get(row, dotted, "max", float)
            if not minimum < maximum:
                raise self.fail(f"{dotted}.max", "must be greater than min")
            return Item(**common, minimum=minimum, maximum=maximum)
        return Item(**common, max_length=self.get(row, dotted, "max_length", int, 2000))


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a text", int: "a whole number", float: "a number", bool: "true or false",
             list: "a list", dict: "a table"}
    if isinstance(kind, tuple):
        return " or ".join(names.get(k, k.__name__) for k in kind)
    return names.get(kind, kind.__name__)


def preference_coefficient(rating: int, points: int) -> float:
    """A rating on a ``points``-point scale mapped onto [0.01, 0.99] (MODEL.md)."""
    return 0.01 + 0.98 * (rating - 1) / (points - 1)
