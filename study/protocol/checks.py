"""What is wrong with a protocol, as (dotted field, message) pairs.

Two sources: pydantic's validation errors, turned into the protocol's own words with the
error's location spelled as the dotted field ``study.protocol.loader`` finds the line of, and the
checks that relate one part of a valid-looking protocol to another (names that must
exist, robots that must differ, kits that must agree).
"""

from __future__ import annotations

import difflib
import re
import types
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from study.allocation.terms import ALGORITHMS, InvalidInput, terms_problems, validate_kits
from study.protocol import schema
from study.protocol.colours import AA_RATIO, contrast, ink_on
from study.protocol.schema import ITEM_KINDS, TASK_NAMES
from study.protocol.texts import plural_of, singular_of

if TYPE_CHECKING:
    from study.protocol.loader import Protocol

Problem = tuple[str, str]  # dotted field, message
ROBOT_PLACEHOLDER = re.compile(r"\{robot:([a-z][a-z0-9_-]*)\}")
# Explicit bidirectional formatting: embeddings, overrides, their end, and isolates.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


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
_RANGE_KINDS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")
# Keys that moved to another section, named in the error instead of a close match.
_MOVED = {"study.open_enrolment": "it moved to [recruitment] open_enrolment"}


def schema_problems(error: ValidationError) -> list[Problem]:
    """Every schema error, except a missing key explained by an unknown one."""
    problems: list[tuple[str, str, str]] = []
    for detail in error.errors(include_url=False):
        parts, _ = _walk(schema.ProtocolFile, detail["loc"])
        kind = detail["type"]
        if parts == ["conditions"] and kind in ("too_short", "too_long"):
            problems.append(_condition_count(detail))
            continue
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


def _condition_count(detail: dict[str, Any]) -> tuple[str, str, str]:
    """Too few or too many conditions, said as the study's design: the problem is placed
    at the first condition (too few) or the first one too many."""
    given = len(detail["input"]) if isinstance(detail.get("input"), list) else 0
    where = "conditions" if given <= schema.MAX_CONDITIONS else (
        f"conditions.{schema.MAX_CONDITIONS}")
    return where, (f"a study compares {schema.MIN_CONDITIONS} to {schema.MAX_CONDITIONS} "
                   f"conditions, one session each (got {given})"), detail["type"]


def _without_explained_missing(problems: list[tuple[str, str, str]]) -> list[Problem]:
    """A missing key next to an unknown key in the same table is usually the same typo:
    report the unknown key (with its suggestion) only."""
    with_unknown = {_parent(dotted) for dotted, _, kind in problems
                    if kind == "extra_forbidden"}
    return [(dotted, message) for dotted, message, kind in problems
            if not (kind == "missing" and _parent(dotted) in with_unknown)]


def _parent(dotted: str) -> str:
    return dotted.rpartition(".")[0]


def _describe(detail: dict[str, Any]) -> str:
    kind, context = detail["type"], detail.get("ctx", {})
    if kind == "string_pattern_mismatch":
        message = schema.PATTERN_HINTS.get(context.get("pattern"), detail["msg"])
    elif kind in _RANGE_KINDS and detail["loc"][-1] in schema.RANGE_HINTS:
        message = schema.RANGE_HINTS[detail["loc"][-1]]
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
    if isinstance(value, float) or (isinstance(value, int) and abs(value) < 10**40):
        return repr(value)
    if isinstance(value, int):
        return f"a number of {len(str(abs(value)))} digits"
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


def cross_problems(doc: schema.ProtocolFile, data: dict[str, Any]) -> Iterator[Problem]:
    """Problems between parts of a protocol that passed the schema (``data``: its raw
    tables, for the texts' robot references)."""
    yield from _study_problems(doc)
    yield from _theme_problems(doc)
    yield from _condition_problems(doc)
    yield from _algorithm_problems(doc)
    yield from _scale_problems(doc)
    yield from _questionnaire_problems(doc)
    yield from _probe_problems(doc)
    yield from _robot_reference_problems(doc, data)
    yield from _character_problems(data)
    yield from _calibration_problems(doc)
    yield from _singular_problems(doc)
    yield from _analysis_problems(doc)
    yield from _pool_problems(doc)
    yield from _team_problems(doc)
    yield from _recruitment_problems(doc)
    yield from _size_problems(doc)


def _study_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    try:
        validate_kits(doc.study.kits, len(doc.team.seats) if doc.team else 2)
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
        ratio = contrast(theme.colour, ink_on(theme.colour))
        if ratio < AA_RATIO:
            yield f"themes.{index}.colour", (
                f"text on {theme.colour} reaches only {ratio:.2f}:1 in dark ink or white; "
                f"the theme's badge needs {AA_RATIO}:1 (WCAG AA): choose a darker or a "
                "lighter colour")
    for name in TASK_NAMES:
        theme = getattr(doc.cookies, name).theme
        if theme not in seen:
            yield f"cookies.{name}.theme", f"names no theme ({', '.join(sorted(seen))})"
    if doc.cookies.squares.theme == doc.cookies.letters.theme:
        yield "cookies.letters.theme", (f"both cookie types use '{doc.cookies.letters.theme}'; "
                                        "each needs its own theme for its own preference")
    by_rating = doc.study.theme_assignment == "by-rating"
    if by_rating and doc.study.preferred_on is None:
        yield "study.preferred_on", ('theme_assignment = "by-rating" needs the cookie that '
                                     'carries the theme rated higher ("squares" or "letters")')
    if not by_rating and doc.study.preferred_on is not None:
        yield "study.preferred_on", 'applies only with theme_assignment = "by-rating"'
    if doc.study.tied_ratings == "random" and doc.team is not None:
        yield "study.tied_ratings", ('"random" reads a tie when an agent teammate is chosen; a '
                                     '[team] is formed in its lobby: use "lowest-index" or '
                                     '"unmatched"')


def _condition_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    for index, condition in enumerate(doc.conditions):
        earlier = doc.conditions[:index]
        if condition.id in {other.id for other in earlier}:
            yield f"conditions.{index}.id", (f"condition ids must differ ('{condition.id}' is "
                                             "repeated)")
        if condition.robot.casefold() in {other.robot.casefold() for other in earlier}:
            yield f"conditions.{index}.robot", (
                f"two robots are called '{condition.robot}'; participants must be able to "
                "tell them apart")
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


def _algorithm_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    """Declared algorithms (``[[algorithms]]``) and the names conditions run them by."""
    declared = [algorithm.id for algorithm in doc.algorithms]
    for index, algorithm in enumerate(doc.algorithms):
        dotted = f"algorithms.{index}"
        if algorithm.id in ALGORITHMS:
            yield f"{dotted}.id", (f"'{algorithm.id}' is a preset; a declared algorithm needs "
                                   "its own id")
        elif algorithm.id in declared[:index]:
            yield f"{dotted}.id", f"algorithm ids must be unique ('{algorithm.id}' is repeated)"
        yield from _reward_problems(doc, algorithm, dotted)
    names = ", ".join([*ALGORITHMS, *declared])
    for index, condition in enumerate(doc.conditions):
        if condition.algorithm not in ALGORITHMS and condition.algorithm not in declared:
            yield f"conditions.{index}.algorithm", (
                f"must be one of {names} (a preset or the id of an [[algorithms]] table; got "
                f"'{condition.algorithm}')")
    for index, name in enumerate(doc.pool.algorithms):
        if name not in ALGORITHMS and name not in declared:
            yield f"pool.algorithms.{index}", (f"'{name}': unknown; expected one of {names} (a "
                                               "preset or the id of an [[algorithms]] table)")
        elif name in doc.pool.algorithms[:index]:
            yield f"pool.algorithms.{index}", f"'{name}' is listed twice"


def _reward_problems(doc: schema.ProtocolFile, algorithm: schema.AlgorithmSection,
                     dotted: str) -> Iterator[Problem]:
    """Terms or code (not both), weights that sum to 1, bounds where fair_equity needs
    them and nowhere else."""
    if algorithm.terms is None and algorithm.python is None:
        yield dotted, 'needs terms = { <term> = <weight>, ... } or python = "module:function"'
        return
    if algorithm.terms is not None and algorithm.python is not None:
        yield f"{dotted}.python", "a goal reward is given by terms or by python, not both"
        return
    if algorithm.python is None and "python_seconds" in algorithm.model_fields_set:
        yield f"{dotted}.python_seconds", "only a goal reward given as code (python) uses it"
    if algorithm.terms is not None:
        for term, message in terms_problems(algorithm.terms):
            yield f"{dotted}.terms" + (f".{term}" if term else ""), message
    uses_bounds = "fair_equity" in (algorithm.terms or {})
    given = "fea_bounds" in algorithm.model_fields_set
    bounds = algorithm.fea_bounds
    if uses_bounds and not given:
        yield f"{dotted}.terms.fair_equity", ('needs fea_bounds = "pool" (the bounds of '
                                              '[pool.fea]) or [lo, hi]')
    elif given and not uses_bounds:
        yield f"{dotted}.fea_bounds", "only a fair_equity term uses fea_bounds"
    elif bounds is not None and not bounds[0] < bounds[1]:
        yield f"{dotted}.fea_bounds", 'must be "pool" or [lo, hi] with lo < hi'
    elif given and bounds is None and (doc.pool.fea is None or "fea" not in doc.pool.algorithms):
        yield f"{dotted}.fea_bounds", ('"pool" needs "fea" in pool.algorithms and a [pool.fea] '
                                       'section with bounds')


def code_problems(doc: schema.ProtocolFile, folder: Path) -> Iterator[Problem]:
    """Goal rewards given as code, each tried in a child process (imported from the
    Python path, else the protocol's folder, and called on sample teams of the protocol's
    size, every step within its ``python_seconds``): one finite value in [0, 1] per goal,
    the same for the same teams on every call."""
    coded = [(index, algorithm) for index, algorithm in enumerate(doc.algorithms)
             if algorithm.python is not None]
    if not coded:
        return
    from study.allocation.trial import goal_reward_problem

    humans = len(doc.team.seats) if doc.team else 2
    for index, algorithm in coded:
        problem = goal_reward_problem(algorithm.python, humans, tuple(doc.study.kits),
                                      algorithm.memory == "study", folder,
                                      algorithm.python_seconds)
        if problem is not None:
            yield f"algorithms.{index}.python", problem


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
            if isinstance(item, schema.ChoiceItem) and len(set(item.options)) < len(item.options):
                yield f"{dotted}.options", "lists an option twice"
            if name == "session" and item.kind in schema.ROBOT_ITEM_KINDS:
                yield f"{dotted}.kind", (f'"{item.kind}" is about every robot: ask it in '
                                         "[questionnaires.post], after the last session")


def _probe_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    """Every probe names a scale, has its own id and follows rounds a session has."""
    rounds = sum(doc.study.kits) // (len(doc.team.seats) if doc.team else 2)
    seen: set[str] = set()
    for index, probe in enumerate(doc.probes):
        dotted = f"probes.{index}"
        if probe.id in seen:
            yield f"{dotted}.id", f"probe ids must be unique ('{probe.id}' is repeated)"
        seen.add(probe.id)
        if probe.scale not in doc.scales:
            yield f"{dotted}.scale", f"names no scale ({', '.join(sorted(doc.scales))})"
        after = probe.after
        numbers = after if isinstance(after, list) else [
            int(after.removeprefix("every").strip() or 1)]
        outside = sorted({n for n in numbers if n > rounds})
        if outside:
            yield f"{dotted}.after", (f"round {outside[0]} is beyond the {rounds} rounds of "
                                      "a session")
        if isinstance(after, list) and len(set(after)) < len(after):
            yield f"{dotted}.after", "lists a round twice"


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


def _character_problems(data: dict[str, Any]) -> Iterator[Problem]:
    """No text holds a control character (only newline and tab) or a bidirectional
    override, embedding or isolate: they hide or reorder what a page, the console or a
    terminal shows (TOML lets them in as escapes such as \\u0000 and \\u202e)."""
    for dotted, text in _texts(data, ""):
        hidden = next((char for char in text if _hidden(char)), None)
        if hidden is not None:
            yield dotted, (f"holds the invisible character U+{ord(hidden):04X} "
                           f"({unicodedata.name(hidden, 'a control character')}); "
                           "remove it")


def _hidden(char: str) -> bool:
    return char in BIDI_CONTROLS or (
        unicodedata.category(char) == "Cc" and char not in "\n\t")


def _calibration_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    calibration = doc.calibration
    if calibration is not None and calibration.last < calibration.first:
        yield "calibration.last", (f"{calibration.last} is before first ({calibration.first}): "
                                   "the pilot's last measurement cannot precede its first")


def _singular_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    """A text with a number and its singular are overridden together: one left to its
    default would show in another language whenever the number is, or is not, 1."""
    given = doc.texts.model_fields_set
    for key in sorted(given):
        singular = singular_of(key)
        pair = singular or plural_of(key)
        if pair is not None and pair not in given:
            yield f"texts.{key}", (f"goes with texts.{pair}: override both "
                                   f"({singular or key} is shown when the number is 1)")


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
    if doc.study.clipped_capability == "keep" and "clipped-capability" in rules.exclude:
        yield "analysis.exclude", ("'clipped-capability' leaves out the participants "
                                   'clipped_capability = "keep" keeps in the analysis (and '
                                   'reports without them beside it): use "continue" to '
                                   "leave them out")
    if item is not None and item.kind in schema.ROBOT_ITEM_KINDS:
        yield "analysis.manipulation_check_item", (
            f"'{item.id}' is a {item.kind} item; the check needs one answer (a choice, "
            "number, Likert or text item)")
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
    yield from _target_team_problems(doc)
    for index, condition in enumerate(doc.conditions):
        if condition.algorithm == "fea" and condition.fea_bounds is None and (
                pool.fea is None or "fea" not in pool.algorithms):
            yield f"conditions.{index}.fea_bounds", (
                '"pool" needs "fea" in pool.algorithms and a [pool.fea] section with bounds')


def _team_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    """A [team] its pool, pages and lobby cannot serve (docs/teams.md)."""
    team = doc.team
    humans = len(team.seats) if team else 2
    if doc.pool.humans != humans:
        yield "pool.humans", (f"is {doc.pool.humans}, but the team has {humans} seats: agent "
                              "seats and FEA's bounds come from teams of its size"
                              if team else f"is {doc.pool.humans}; a study without [team] "
                              "teams the participant with one agent (2)")
    if team is None:
        for name in schema.TEAM_PAGES:
            if getattr(doc.pages, name) is not None:
                yield f"pages.{name}", "is a page of real teams; add a [team] or drop it"
        return
    if doc.study.agent_teammate == "concealed":
        yield "study.agent_teammate", ("is \"concealed\", but a [team]'s pages and stations "
                                       "say which seats are agents: drop it")
    if doc.pages.lobby is None:
        yield "team", "needs the page [pages.lobby] (what the people read there)"
    for name, cause, how in _team_pages(team):
        if getattr(doc.pages, name) is None:
            yield cause, f"{how}: add [pages.{name}], the team page that tells them so"
    if "person" not in team.seats:
        yield "team.seats", "needs at least one \"person\" seat"
    yield from _formation_problems(team, doc.pool.accept.team_types)
    lobby = team.lobby
    if not lobby.shared_seconds and not lobby.individual_seconds:
        yield "team.lobby", ("needs shared_seconds or individual_seconds: a lobby without a "
                             "timer can strand people who wait for a team that never fills")


def _team_pages(team: schema.TeamSection) -> Iterator[tuple[str, str, str]]:
    """The team pages people of this design can read (each the page, the key that makes
    it possible, and how): a full lobby group in the seats, and, with agents on a
    timeout, one person alone or (by arrival, three people a team) two."""
    persons = team.seats.count("person")
    full = schema.team_page(persons, len(team.seats))
    if full == "team":
        yield full, "team", "seats people only"
    else:
        yield full, "team.seats", (f"seats {persons} {'person' if persons == 1 else 'people'}"
                                   " with agents")
    if team.lobby.on_timeout != "agents":
        return
    if persons > 1:
        yield ("team_only_agents", "team.lobby.on_timeout",
               'is "agents": a person who waits alone past a timer is seated with agents')
    if team.formation == "arrival" and persons > 2:
        yield ("team_with_agents", "team.lobby.on_timeout",
               'is "agents": two people who wait past a timer are seated with agents')


def _recruitment_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    """Keys nothing would use: an id pattern without ids, and pay or links for a lobby or
    a team seat in a study without a [team] (docs/recruitment.md)."""
    if doc.recruitment.id_pattern is not None and doc.recruitment.id_parameter is None:
        yield "recruitment.id_pattern", "checks recruitment ids; set id_parameter too"
    if doc.team is not None:
        return
    for key in ("per_lobby_minute", "lobby_cap", "teammate_dropped"):
        if doc.bonus is not None and getattr(doc.bonus, key):
            yield f"bonus.{key}", "pays for a [team]'s lobby or seats; add a [team] or drop it"
    for name in ("lobby_timeout", "dropped"):
        if getattr(doc.recruitment.outcomes, name) is not None:
            yield f"recruitment.outcomes.{name}", ("ends only a [team]'s people; add a [team] "
                                                   "or drop it")


def _formation_problems(team: schema.TeamSection,
                        kept: Sequence[str] | None) -> Iterator[Problem]:
    if team.formation == "arrival":
        if team.team_types:
            yield "team.team_types", 'is for formation = "traits"; arrival forms any team'
        return
    if team.seats != ["person", "person"]:
        yield "team.formation", ('"traits" pairs two people: seats must be ["person", '
                                 '"person"]')
    if not team.team_types:
        yield "team.team_types", 'formation = "traits" needs the team types to form'
    elif kept and not set(team.team_types) & set(kept):
        yield "team.team_types", (f"{', '.join(team.team_types)}: the pool keeps only "
                                  f"{', '.join(kept)} teams, so agents can never complete "
                                  "the team when a timer runs out")


# Which correlation (positive: the preferred type is the best type) the participant's role
# has in each team type: (most capable human, the other).
ROLE_SIGNS = {"mixed": (False, True), "twins": (True, True), "negative": (False, False),
              "mixed-reversed": (True, False)}


def _target_team_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    """A target team the pool can never form: a team type its acceptance rejects, or
    themes assigned against the participant's role where the pool's ranges fix the best
    cookie."""
    teammate, accept = doc.pool.teammate, doc.pool.accept
    wanted = teammate.team_types
    if wanted and accept.team_types and not set(wanted) & set(accept.team_types):
        yield "pool.teammate.team_types", (
            f"{', '.join(wanted)}: the pool keeps only {', '.join(accept.team_types)} teams "
            "(pool.accept.team_types), so the target team never occurs in it")
    preferred = doc.study.preferred_on
    best = _best_type(doc.pool.sample.c)
    if preferred is None or best is None or not wanted or teammate.role == "any":
        return
    top = teammate.role == "most-capable"
    signs = {ROLE_SIGNS[name][0 if top else 1] for name in wanted}
    positive = TASK_NAMES.index(preferred) == best
    if signs == {not positive}:
        needed = "positively" if not positive else "negatively"
        yield "study.preferred_on", (
            f"{preferred!r} makes every participant {'positively' if positive else 'negatively'}"
            f" correlated (the pool's ranges make {TASK_NAMES[best]} everyone's best cookie), "
            f"but the role {teammate.role!r} in {', '.join(wanted)} teams needs them "
            f"{needed} correlated")


def _best_type(sample_c: Any) -> int | None:
    """The task type every sampled human is most capable at, when the pool's capability
    ranges decide it (one type's range lies wholly above the other's); else None (also
    for ranges of another shape, which the pool's own checks refuse)."""
    depth, node = 0, sample_c
    while isinstance(node, list) and node:
        depth, node = depth + 1, node[0]
    rows = {1: [[sample_c] * 2], 2: [sample_c], 3: sample_c}.get(depth, [])
    if not rows or not all(_pairs(row) for row in rows):
        return None
    for task_type in range(2):
        other = 1 - task_type
        if all(row[task_type][0] > row[other][1] for row in rows):
            return task_type
    return None


def _pairs(row: Any) -> bool:
    """Whether ``row`` is two ``[lo, hi]`` intervals of numbers."""
    return (isinstance(row, list) and len(row) == 2
            and all(isinstance(pair, list) and len(pair) == 2
                    and all(isinstance(x, int | float) for x in pair) for pair in row))


# --- warnings: valid, but likely not what was meant ---------------------------------------


def protocol_warnings(protocol: Protocol) -> Iterator[Problem]:
    """What a valid protocol does that its author likely did not mean, for ``study
    check`` to say: a memory that is always empty, robots a teammate rule must tell apart
    that always follow one plan."""
    yield from _empty_memory(protocol)
    yield from _same_plan_robots(protocol)


def _empty_memory(protocol: Protocol) -> Iterator[Problem]:
    """A robot with memory over the study that every participant meets first."""
    first = protocol.conditions[0]
    if protocol.condition_order == "fixed" and first.declared and first.declared.memory:
        yield "conditions.0.algorithm", (
            f"Robot {first.robot} runs {first.algorithm}, whose memory = \"study\" counts "
            "the kits of earlier sessions, but condition_order = \"fixed\" always puts it "
            "first: its memory is always empty, so it plans as it would without memory")


def _same_plan_robots(protocol: Protocol) -> Iterator[Problem]:
    """Two conditions running one algorithm (same weight, bounds and round order, no
    memory) under a teammate rule that needs every two robots' plans to differ: on one
    team they always follow one plan."""
    teammate = protocol.pool_spec().teammate
    if protocol.team is not None or teammate.rule not in ("typed", "distinct"):
        return
    seen: dict[tuple[Any, ...], int] = {}
    for index, condition in enumerate(protocol.conditions):
        if condition.declared is not None and condition.declared.memory:
            continue
        settings = (condition.w, condition.fea_bounds) if condition.algorithm == "fea" else ()
        key = (condition.algorithm, settings, condition.round_order)
        if key in seen:
            other = protocol.conditions[seen[key]]
            yield f"conditions.{index}.algorithm", (
                f"runs {condition.algorithm} as conditions.{seen[key]} (Robot {other.robot}) "
                f"does: teammate rule \"{teammate.rule}\" needs every two robots' plans to "
                "differ, and one algorithm follows one plan on a team, so "
                f"{_never_apart(teammate.rule, teammate.unplaced)}")
        seen.setdefault(key, index)


def _never_apart(rule: str, unplaced: str) -> str:
    """What the teammate rule then does for every participant."""
    if rule == "distinct":
        return "it passes over every candidate and takes the nearest member for everyone"
    if unplaced == "unmatched":
        return "no member is ever placed: every participant gets the unmatched page"
    return ("no member is ever placed on target: every participant gets the nearest "
            "member (unplaced = \"continue\")")


# --- what the solver needs, counted before anything is built ----------------------------

FLOAT_BYTES = 8
# Past 63 goals a set of optimal goals no longer fits a 64-bit mask: the solver then walks
# a whole batch of teams through full action tables (``study.allocation.solver.plan_rows``).
MASK_GOALS = 63


@dataclass(frozen=True)
class SolverSize:
    """The allocation MDP of a protocol's kits and the solver's tables for it."""

    states: int
    goals: int
    actions: int
    teams_at_once: int

    @property
    def table_bytes(self) -> int:
        """States x (goals + actions) floats per team: the best reachable goal reward
        and every action's value, for every team solved at once."""
        return self.states * (self.goals + self.actions) * FLOAT_BYTES * self.teams_at_once

    def describe(self) -> str:
        teams = "" if self.teams_at_once == 1 else f" for {self.teams_at_once:,} teams at once"
        return (f"{self.states:,} states, {self.goals:,} goals, {self.actions} actions; "
                f"solver tables {readable_bytes(self.table_bytes)}{teams}")


def solver_size(kits: Sequence[int], pool_teams: int, humans: int = 2) -> SolverSize:
    """What solving ``kits`` takes: one team's tables, or a pool chunk's past 63 goals."""
    from study.protocol.pool_spec import DEFAULT_CHUNK

    states, goals = count_states(humans, kits)
    at_once = min(pool_teams, DEFAULT_CHUNK) if goals > MASK_GOALS else 1
    return SolverSize(states, goals, len(kits) ** humans, at_once)


def count_states(humans: int, kits: Sequence[int]) -> tuple[int, int]:
    """Reachable states and goal states of the allocation MDP (MODEL.md), counted without
    enumerating them: the states at depth ``t`` are the allocations giving every human
    ``t`` kits, no type beyond its kits (any such allocation is reached by handing each
    human's kits out in any order)."""
    per_depth = [_allocations(humans, kits, depth)
                 for depth in range(sum(kits) // humans + 1)]
    return sum(per_depth), per_depth[-1]


def _allocations(humans: int, kits: Sequence[int], depth: int) -> int:
    """Allocations of ``depth`` kits to each human, counted human by human over the kits
    of each type handed out so far."""
    handed: Counter[tuple[int, ...]] = Counter({(0,) * len(kits): 1})
    for _ in range(humans):
        after: Counter[tuple[int, ...]] = Counter()
        for used, ways in handed.items():
            for held in _compositions(depth, len(kits)):
                total = tuple(u + h for u, h in zip(used, held, strict=True))
                if all(t <= k for t, k in zip(total, kits, strict=True)):
                    after[total] += ways
        handed = after
    return sum(handed.values())


def _compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every way to write ``total`` as ``parts`` non-negative whole numbers, in order."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            yield (first, *rest)


def readable_bytes(count: int) -> str:
    """``count`` bytes in the largest binary unit it fills (up to GiB)."""
    units = ("bytes", "KiB", "MiB", "GiB")
    power = 0
    while power < len(units) - 1 and count >= 1024 ** (power + 1):
        power += 1
    return f"{count:,} bytes" if power == 0 else f"{count / 1024**power:,.1f} {units[power]}"


def _size_problems(doc: schema.ProtocolFile) -> Iterator[Problem]:
    """Kits whose solver tables would not fit: refused with the size they would need."""
    try:
        kits = validate_kits(doc.study.kits, 2)
    except InvalidInput:
        return  # reported by _study_problems
    size = solver_size(kits, doc.pool.teams)
    limit = schema.LIMITS["solver_bytes"]
    if size.table_bytes > limit:
        yield "study.kits", (
            f"{list(kits)} make {size.states:,} states and {size.goals:,} goals: past "
            f"{MASK_GOALS} goals the solver keeps states x (goals + actions) numbers for "
            f"each of {size.teams_at_once:,} pool teams at once, "
            f"{readable_bytes(size.table_bytes)}, above the limit of {readable_bytes(limit)}"
            "; use fewer kits")
