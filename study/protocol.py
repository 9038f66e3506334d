"""The study protocol: one declarative TOML file per study, validated on load.

Every text a participant reads (consent, theme information, questionnaire items, robot
names, transparency texts) lives in the protocol, so a study is changed by editing one file
and the templates stay generic. ``load_protocol`` is the one check every command runs
(``study check``, ``study serve``): the schema of ``study.protocol_schema`` (unknown keys,
types, sane finite ranges), then the checks relating parts to each other, then the
``[pool]`` section as ``study.pool`` reads it. Every error names the file, the line and the
field, and only the first (by line) is raised, with a count of the others.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from study import protocol_schema as schema
from study.model import InvalidInput, validate_kits
from study.protocol_schema import (
    CONDITION_ORDERS,
    EXCLUSION_RULES,
    ITEM_KINDS,
    PAGES,
    ROUND_ORDERS,
    TASK_NAMES,
)
from study.tomlsource import ProtocolError, TomlSource

__all__ = ["CONDITION_ORDERS", "EXCLUSION_RULES", "ITEM_KINDS", "PAGES", "ROUND_ORDERS",
           "TASK_NAMES", "AnalysisRules", "Protocol", "ProtocolError", "Recruitment",
           "load_protocol", "parse_protocol", "preference_coefficient"]

IDENTIFIER = re.compile(schema.IDENTIFIER_PATTERN)
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
class Recruitment:
    """How participants arrive from a recruitment platform and are sent back to it."""

    id_parameter: str | None = None
    completion_url: str | None = None
    return_url: str | None = None
    open_enrolment: bool = True
    unconsented_expiry_minutes: float = 60.0
    binding_idle_minutes: float = 30.0


@dataclass(frozen=True)
class AnalysisRules:
    """The analysis set, declared before the data are seen (``[analysis]``)."""

    exclude: tuple[str, ...] = ()
    keep_completed_sessions_of_incomplete: bool = True
    manipulation_check_item: str | None = None
    manipulation_check_pass: tuple[str, ...] = ()


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
    recruitment: Recruitment = field(default_factory=Recruitment)
    analysis: AnalysisRules = field(default_factory=AnalysisRules)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def open_enrolment(self) -> bool:
        """Whether an unknown code or ``/start`` creates a participant."""
        return self.recruitment.open_enrolment

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
    return _validate(TomlSource.read(path))


def parse_protocol(text: str, path: Path | str = "<protocol>") -> Protocol:
    """Validate protocol text (tests and tools that hold the text in memory)."""
    return _validate(TomlSource.parse(text, path))


Problem = tuple[str, str]  # dotted field, message


def _validate(source: TomlSource) -> Protocol:
    try:
        document = schema.ProtocolFile.model_validate(source.data)
    except ValidationError as error:
        raise _first(source, _schema_problems(error)) from None
    problems = list(_cross_problems(document, source.data))
    if problems:
        raise _first(source, problems)
    _check_pool(source)
    return _build(document, source.path)


def _first(source: TomlSource, problems: list[Problem]) -> ProtocolError:
    """The problem written first in the file, saying how many more there are."""
    ordered = sorted(problems, key=lambda problem: source.line_of(problem[0]))
    dotted, message = ordered[0]
    if len(ordered) > 1:
        others = len(ordered) - 1
        message += f" (and {others} more problem{'s' if others > 1 else ''})"
    return source.error(dotted, message)


def _check_pool(source: TomlSource) -> None:
    """The ``[pool]`` section as the pool builder reads it (interval shapes, overlaps)."""
    from study.pool.spec import parse_pool

    parse_pool(source.data["pool"], source.error, name=source.path.stem)


# --- schema errors as field and message -------------------------------------------------

_MESSAGES = {
    "missing": "is required",
    "string_type": "must be a text (in quotes)",
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "list_type": "must be a list [...]",
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "model_attributes_type": "must be a table",
    "finite_number": "must be a finite number (not nan or inf)",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "string_too_short": "must not be empty",
    "string_too_long": "must be at most {max_length} characters long",
    "too_short": "must hold at least {min_length} item(s)",
    "too_long": "must hold at most {max_length} items",
    "literal_error": "must be one of {expected}",
}
# Keys that moved to another section, named in the error instead of a close match.
_MOVED = {"study.open_enrolment": "it moved to [recruitment] open_enrolment"}


def _schema_problems(error: ValidationError) -> list[Problem]:
    problems: list[tuple[str, str, str]] = []
    for detail in error.errors(include_url=False):
        parts, _ = _walk(schema.ProtocolFile, detail["loc"])
        kind = detail["type"]
        if kind == "extra_forbidden":
            _, parent = _walk(schema.ProtocolFile, detail["loc"][:-1])
            message = _unknown_key(".".join(parts), parts[-1], _keys_of(parent))
        elif kind in ("union_tag_not_found", "union_tag_invalid"):
            parts.append("kind")
            message = ("is required: " if kind == "union_tag_not_found" else "must be ") + (
                "one of " + ", ".join(ITEM_KINDS))
        else:
            message = _describe(detail)
        problems.append((".".join(parts), message, kind))
    return _without_explained_missing(problems)


def _without_explained_missing(problems: list[tuple[str, str, str]]) -> list[Problem]:
    """A missing key next to an unknown key in the same table is usually the same typo:
    report the unknown key (with its suggestion) only."""
    parent = lambda dotted: dotted.rpartition(".")[0]  # noqa: E731
    with_unknown = {parent(dotted) for dotted, _, kind in problems if kind == "extra_forbidden"}
    return [(dotted, message) for dotted, message, kind in problems
            if not (kind == "missing" and parent(dotted) in with_unknown)]


def _describe(detail: dict[str, Any]) -> str:
    kind, context = detail["type"], detail.get("ctx", {})
    if kind == "string_pattern_mismatch":
        message = schema.PATTERN_HINTS.get(context.get("pattern"), detail["msg"])
    elif kind == "value_error":
        message = str(context.get("error", detail["msg"]))
    elif kind == "literal_error" and " " not in str(context.get("expected")):
        message = f"must be {context['expected']}"
    elif kind in _MESSAGES:
        message = _MESSAGES[kind].format(**{key: f"{value:g}" if isinstance(value, float)
                                            else value for key, value in context.items()})
    else:
        message = detail["msg"]
    shown = _shown(detail.get("input"))
    return f"{message} (got {shown})" if shown and kind != "missing" else message


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"{value[:30]!r}... ({len(value):,} characters)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        shown = repr(value) if abs(value) < 10**40 else f"{float(value):.3g}"
        return shown
    return ""


def _unknown_key(dotted: str, key: str, allowed: list[str]) -> str:
    if dotted in _MOVED:
        return f"unknown key; {_MOVED[dotted]}"
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean '{close[0]}'?"
    return f"unknown key; expected one of {', '.join(allowed)}" if allowed else "unknown key"


def _walk(root: Any, loc: tuple[Any, ...]) -> tuple[list[str], Any]:
    """The dotted path of a pydantic error location (without union tags or ``[key]``
    markers) and the type found there."""
    node, parts = root, []
    for part in loc:
        node = _unwrap(node)
        if part == "[key]":
            continue
        member = _tagged_member(node, part)
        if member is not None:
            node = member
            continue
        parts.append(str(part))
        node = _child(node, part)
    return parts, _unwrap(node)


def _unwrap(node: Any) -> Any:
    while True:
        origin = get_origin(node)
        if origin is Annotated:
            node = get_args(node)[0]
        elif origin in (Union, types.UnionType) and type(None) in get_args(node) and len(
                get_args(node)) == 2:
            node = next(arg for arg in get_args(node) if arg is not type(None))
        else:
            return node


def _tagged_member(node: Any, part: Any) -> Any:
    if get_origin(node) not in (Union, types.UnionType) or not isinstance(part, str):
        return None
    for member in get_args(node):
        tag = getattr(member, "model_fields", {}).get("kind")
        if tag is not None and part in get_args(tag.annotation):
            return member
    return None


def _child(node: Any, part: Any) -> Any:
    if isinstance(node, type) and issubclass(node, BaseModel):
        info = node.model_fields.get(part) if isinstance(part, str) else None
        return info.annotation if info else Any
    if get_origin(node) is list and isinstance(part, int):
        return get_args(node)[0]
    if get_origin(node) is dict:
        return get_args(node)[1]
    return Any


def _keys_of(node: Any) -> list[str]:
    if isinstance(node, type) and issubclass(node, BaseModel):
        return list(node.model_fields)
    return []


# --- checks relating one part of the protocol to another --------------------------------


def _cross_problems(doc: schema.ProtocolFile, data: dict[str, Any]) -> Iterator[Problem]:
    yield from _study_problems(doc)
    yield from _theme_problems(doc)
    yield from _condition_problems(doc)
    yield from _scale_problems(doc)
    yield from _questionnaire_problems(doc)
    yield from _robot_reference_problems(doc, data)
    yield from _analysis_problems(doc)
    yield from _pool_problems(doc)


def _study_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    try:
        validate_kits(doc.study.kits, 2)
    except InvalidInput as error:
        yield "study.kits", str(error)
    for name in TASK_NAMES:
        if doc.study.practice.count(name) < 2:
            yield "study.practice", (f"needs at least two {name} rounds: the second one "
                                     "measures the capability")


def _theme_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    seen: set[str] = set()
    for index, theme in enumerate(doc.themes):
        if theme.id in seen:
            yield f"themes.{index}.id", f"theme ids must be unique ('{theme.id}' is repeated)"
        seen.add(theme.id)
    for name in TASK_NAMES:
        theme = getattr(doc.cookies, name).theme
        if theme not in seen:
            yield f"cookies.{name}.theme", f"names no theme ({', '.join(sorted(seen))})"


def _condition_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    first, second = doc.conditions
    if first.id == second.id:
        yield "conditions.1.id", "condition ids must differ"
    if first.robot.casefold() == second.robot.casefold():
        yield "conditions.1.robot", (f"both robots are called '{second.robot}'; participants "
                                     "must be able to tell them apart")
    for index, condition in enumerate(doc.conditions):
        if condition.algorithm != "fea":
            for key in ("w", "fea_bounds"):
                if key in condition.model_fields_set:
                    yield f"conditions.{index}.{key}", (
                        f"only the fea algorithm uses {key} (this robot runs "
                        f"{condition.algorithm})")
        elif condition.fea_bounds is not None and not (
                condition.fea_bounds[0] < condition.fea_bounds[1]):
            yield f"conditions.{index}.fea_bounds", 'must be "pool" or [lo, hi] with lo < hi'


def _scale_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    for name, scale in doc.scales.items():
        if len(scale.anchors) > scale.points:
            yield f"scales.{name}.anchors", (f"has {len(scale.anchors)} labels for "
                                             f"{scale.points} points")
    if doc.preferences.scale not in doc.scales:
        yield "preferences.scale", f"names no scale ({', '.join(sorted(doc.scales))})"


def _questionnaire_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    for name in ("session", "post"):
        seen: set[str] = set()
        for index, item in enumerate(getattr(doc.questionnaires, name).items):
            dotted = f"questionnaires.{name}.items.{index}"
            if item.id in seen:
                yield f"{dotted}.id", f"item ids must be unique ('{item.id}' is repeated)"
            seen.add(item.id)
            if isinstance(item, schema.LikertItem) and item.scale not in doc.scales:
                yield f"{dotted}.scale", f"names no scale ({', '.join(sorted(doc.scales))})"
            if isinstance(item, schema.NumberItem) and not item.min < item.max:
                yield f"{dotted}.max", "must be greater than min"


def _robot_reference_problems(doc: schema.ProtocolFile,
                              data: dict[str, Any]) -> Iterator[Problem]:
    """Every ``{robot:<id>}`` in a participant-facing text names a condition."""
    ids = {condition.id for condition in doc.conditions}
    for dotted, text in _texts(data, ""):
        if dotted.startswith("pool"):
            continue
        for ref in ROBOT_PLACEHOLDER.findall(text):
            if ref not in ids:
                yield dotted, f"{{robot:{ref}}} names no condition ({', '.join(sorted(ids))})"


def _texts(node: Any, dotted: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, str):
        yield dotted, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _texts(value, f"{dotted}.{key}" if dotted else key)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _texts(value, f"{dotted}.{index}")


def _analysis_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    rules = doc.analysis
    if len(set(rules.exclude)) != len(rules.exclude):
        yield "analysis.exclude", "names a rule twice"
    post = {item.id: item for item in doc.questionnaires.post.items}
    item = post.get(rules.manipulation_check_item or "")
    if rules.manipulation_check_item is not None and item is None:
        yield "analysis.manipulation_check_item", (
            f"'{rules.manipulation_check_item}' is not a post-study item ({', '.join(post)})")
    if "failed-manipulation-check" in rules.exclude and not rules.manipulation_check_pass:
        yield "analysis.exclude", ("'failed-manipulation-check' needs "
                                   "analysis.manipulation_check_item and "
                                   "manipulation_check_pass")
    if rules.manipulation_check_pass and rules.manipulation_check_item is None:
        yield "analysis.manipulation_check_pass", "needs analysis.manipulation_check_item"
    if isinstance(item, schema.ChoiceItem):
        for index, answer in enumerate(rules.manipulation_check_pass):
            if answer not in item.options:
                yield f"analysis.manipulation_check_pass.{index}", (
                    f"'{answer}' is not an option of {item.id} ({' / '.join(item.options)})")


def _pool_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    pool = doc.pool
    if pool.kits != doc.study.kits:
        given = "kits" in pool.model_fields_set
        yield "pool.kits", (f"{pool.kits}{'' if given else ' (the default)'} differs from "
                            f"[study] kits {doc.study.kits}; the pool's teams must play the "
                            "study's sessions")
    for index, condition in enumerate(doc.conditions):
        if condition.algorithm == "fea" and condition.fea_bounds is None and (
                pool.fea is None or "fea" not in pool.algorithms):
            yield f"conditions.{index}.fea_bounds", (
                '"pool" needs "fea" in pool.algorithms and a [pool.fea] section with bounds')


# --- the validated document as the study reads it ---------------------------------------


def _build(doc: schema.ProtocolFile, path: Path) -> Protocol:
    scales = {name: Scale(s.points, tuple(s.anchors)) for name, s in doc.scales.items()}
    themes = tuple(Theme(t.id, t.name, t.text, t.initials.upper(), t.description, t.colour)
                   for t in doc.themes)
    return Protocol(
        path=path,
        name=doc.study.name,
        title=doc.study.title,
        kits=tuple(doc.study.kits),
        round_seconds=float(doc.study.round_seconds),
        practice_seconds=float(doc.study.practice_seconds),
        practice=tuple(TASK_NAMES.index(name) for name in doc.study.practice),
        condition_order=doc.study.condition_order,
        min_cookie_seconds=float(doc.study.min_cookie_seconds),
        cookies=tuple(CookieType(task_type, name, getattr(doc.cookies, name).theme,
                                 float(getattr(doc.cookies, name).reference_speed))
                      for task_type, name in enumerate(TASK_NAMES)),
        themes=themes,
        conditions=tuple(_condition(c) for c in doc.conditions),
        pages={name: Page(getattr(doc.pages, name).title, getattr(doc.pages, name).text)
               for name in PAGES},
        preference_scale=scales[doc.preferences.scale],
        preference_title=doc.preferences.title,
        preference_prompt=doc.preferences.prompt,
        session_questionnaire=_questionnaire(doc.questionnaires.session, scales),
        post_questionnaire=_questionnaire(doc.questionnaires.post, scales),
        recruitment=_recruitment(doc.recruitment),
        analysis=AnalysisRules(tuple(doc.analysis.exclude),
                               doc.analysis.keep_completed_sessions_of_incomplete,
                               doc.analysis.manipulation_check_item,
                               tuple(doc.analysis.manipulation_check_pass)),
    )


def _recruitment(section: schema.Recruitment) -> Recruitment:
    return Recruitment(section.id_parameter, section.completion_url, section.return_url,
                       section.open_enrolment, float(section.unconsented_expiry_minutes),
                       float(section.binding_idle_minutes))


def _condition(condition: schema.Condition) -> Condition:
    bounds = condition.fea_bounds
    return Condition(condition.id, condition.algorithm, condition.robot,
                     condition.transparency, condition.round_order, float(condition.w),
                     None if bounds is None else (float(bounds[0]), float(bounds[1])))


def _questionnaire(section: schema.Questionnaire, scales: dict[str, Scale]) -> Questionnaire:
    return Questionnaire(section.title, section.text,
                         tuple(_item(item, scales) for item in section.items))


def _item(item: Any, scales: dict[str, Scale]) -> Item:
    common = {"id": item.id, "label": item.label, "text": item.text, "kind": item.kind,
              "required": item.required}
    if isinstance(item, schema.LikertItem):
        return Item(**common, scale=scales[item.scale])
    if isinstance(item, schema.ChoiceItem):
        return Item(**common, options=tuple(item.options))
    if isinstance(item, schema.NumberItem):
        return Item(**common, minimum=float(item.min), maximum=float(item.max))
    return Item(**common, max_length=item.max_length)


def preference_coefficient(rating: int, points: int) -> float:
    """A rating on a ``points``-point scale mapped onto [0.01, 0.99] (MODEL.md)."""
    return 0.01 + 0.98 * (rating - 1) / (points - 1)
