"""The protocol file's schema: every key, its type and its sane range, in one place.

Pydantic models with ``extra="forbid"``, strict types and finite numbers check the shape
of a protocol; ``study.protocol.loader`` adds the checks that relate one part to another (names
that must exist, kits that must agree). The same models publish the JSON Schema
(``docs/protocol.schema.json``) that TOML editors check a protocol against while typing.
"""

from __future__ import annotations

import math
import re
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    create_model,
    model_validator,
)

from study.allocation.terms import ALGORITHMS, EXCLUSION_RULES, MEMORY_SCOPES, TERMS
from study.protocol.pool_names import TEAMMATE_RULES, UNPLACED
from study.protocol.recruitment import OUTCOME_MEANINGS, pattern_problem
from study.protocol.texts import DEFAULT_TEXTS, allowed_placeholders, placeholders

TASK_NAMES = ("squares", "letters")
# A study compares 2 to 4 conditions, one collaborative session each (docs/protocol.md).
MIN_CONDITIONS, MAX_CONDITIONS = 2, 4
ROUND_ORDERS = ("default", "anytime-fair")
CONDITION_ORDERS = ("alternate", "fixed")
THEME_ASSIGNMENTS = ("fixed", "by-rating")
# What equal theme ratings (a tie in a participant's preferences) lead to: the lowest-index
# reading of MODEL.md, the unmatched page, or a random reading drawn and recorded.
TIED_RATINGS = ("lowest-index", "unmatched", "random")
# What follows a capability clipped at 0.01 or 0.99 (not a measurement, MODEL.md): the
# participant continues and the analysis leaves them out, or meets the unmatched page, or
# continues on the clipped value and every confirmatory result is given with and without them.
CLIPPED_CAPABILITY = ("continue", "unmatched", "keep")
# How the pages present an individual study's agent teammate: as the agent it is, or as a
# person until the debrief discloses it (the paper's confederate method, docs/protocol.md).
AGENT_TEAMMATE = ("disclosed", "concealed")
PAGES = ("consent", "themes", "practice", "teammate", "intro", "session", "debrief", "done",
         "declined", "withdrawn", "unmatched")
# Pages of a protocol with a [team] (docs/teams.md): the waiting room, and the team's page
# in one version for each kind of team a person may find there.
TEAM_PAGES = ("lobby", "team", "team_with_agents", "team_only_agents")


def team_page(people: int, seats: int) -> str:
    """The team page that tells a person who is in their team of ``seats`` seats,
    ``people`` of them people: all people, people and agents, or they alone with agents."""
    if people == seats:
        return "team"
    return "team_only_agents" if people == 1 else "team_with_agents"


SEAT_KINDS = ("person", "agent")
FORMATIONS = ("arrival", "traits")
LOBBY_TIMEOUTS = ("agents", "unmatched")
# As ``study.pool`` spells them (a test keeps the copies equal; importing the pool
# package here would load pandas for every protocol read).
TEAM_TYPES = ("mixed", "twins", "negative", "mixed-reversed")
ROLES = ("any", "most-capable", "other")
MOST_CAPABLE_READINGS = ("comparative-advantage", "highest-coefficient")

IDENTIFIER_PATTERN = r"^[a-z][a-z0-9_-]{0,39}$"
PARAMETER_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
NAME_PATTERN = r"^\w[\w .'-]{0,29}$"
URL_PATTERN = r"^https?://"
COLOUR_PATTERN = r"^#[0-9a-fA-F]{6}$"
INITIALS_PATTERN = r"^[A-Za-z0-9!]{1,4}$"
VISIBLE = r"\S"
LANGUAGE_PATTERN = r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$"
PYTHON_PATTERN = r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$"
DAY_PATTERN = r"^\d{4}-\d{2}-\d{2}$"
COMPLETION_CODE_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

# Readable wording for the patterns above, used in error messages.
PATTERN_HINTS = {
    IDENTIFIER_PATTERN: "must be 1 to 40 lower-case letters, digits, '-' or '_', starting "
                        "with a letter",
    PARAMETER_PATTERN: "must be a query parameter name: letters, digits or '_', starting "
                       "with a letter, at most 64",
    NAME_PATTERN: "must be 1 to 30 letters, digits, spaces, '.', \"'\" or '-'",
    COLOUR_PATTERN: "must be a colour like #8b4513",
    INITIALS_PATTERN: "must be 1 to 4 letters, digits or '!'",
    VISIBLE: "must not be empty",
    URL_PATTERN: "must be an http:// or https:// address",
    LANGUAGE_PATTERN: 'must be a language tag like "en", "de" or "pt-BR"',
    PYTHON_PATTERN: 'must name a function as module:function, e.g. "mylab.rewards:nash"',
    DAY_PATTERN: 'must be a day written "YYYY-MM-DD"',
    COMPLETION_CODE_PATTERN: "must be 1 to 64 letters, digits, '-' or '_'",
}

# How long a goal reward given as code may take to import, and for each call on the 64
# sample teams it is tried on, before it is refused as hanging (``python_seconds``).
PYTHON_SECONDS = 5.0
PYTHON_SECONDS_LIMIT = 60.0

LIMITS = {"kits_per_type": 64, "pool_teams": 5_000_000, "seconds": 3600,
          "minutes": 7 * 24 * 60, "items": 60, "text": 20_000,
          "solver_bytes": 2**30}
# Plausible reference speeds, cookies per second: one cookie in 1,000 s up to ten a
# second (a person decorates one in a few seconds; the shipped protocols use 0.07-0.33).
REFERENCE_SPEEDS = (0.001, 10.0)
# Readable wording for the ranges above, used in error messages (by key).
RANGE_HINTS = {
    "reference_speed": f"must be between {REFERENCE_SPEEDS[0]:g} and "
                       f"{REFERENCE_SPEEDS[1]:g} cookies per second (one cookie in 1,000 s "
                       "to ten cookies a second)",
}


class Strict(BaseModel):
    """A protocol table: unknown keys, loose types and NaN or infinity are errors.

    Validators are built on first use (``defer_build``): validating a protocol builds the
    one for ``ProtocolFile`` with every table inside it, not one more per table class.
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False,
                              frozen=True, defer_build=True)


def _text(max_length: int, description: str, **extra: Any) -> Any:
    return Field(min_length=1, max_length=max_length, pattern=VISIBLE,
                 description=description, **extra)


def _has_letters(value: str) -> str:
    if not any(char.isalnum() for char in value):
        raise ValueError("must hold letters or digits")
    return value


def _web_address(value: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or any(
            char.isspace() or ord(char) < 32 for char in value):
        raise ValueError("must be an http:// or https:// address without spaces")
    return value


def _calendar_day(value: str) -> str:
    """A "YYYY-MM-DD" that names a real day (not 2026-13-45)."""
    try:
        date.fromisoformat(value)
    except ValueError:
        raise ValueError("is not a day of the calendar") from None
    return value


def _interval_leaves(value: list[Any]) -> list[Any]:
    """Pool ranges nest at most three lists deep and hold finite numbers in [0, 1]; their
    shape (per task type, per human) is checked by ``study.pool``."""
    def check(node: Any, depth: int) -> None:
        if isinstance(node, list):
            if depth >= 3 or not node:
                raise ValueError("must be [lo, hi], a list of those per task type, or such "
                                 "lists per human")
            for child in node:
                check(child, depth + 1)
        elif (not isinstance(node, int | float) or isinstance(node, bool)
              or not math.isfinite(node) or not 0 <= node <= 1):
            raise ValueError(f"{node!r}: every bound must be a number within [0, 1]")
    check(value, 0)
    return value


Identifier = Annotated[str, Field(pattern=IDENTIFIER_PATTERN, max_length=40)]
Seconds = Annotated[float, Field(ge=1, le=LIMITS["seconds"])]
Minutes = Annotated[float, Field(gt=0, le=LIMITS["minutes"])]
WebAddress = Annotated[str, Field(max_length=2000, pattern=URL_PATTERN),
                       AfterValidator(_web_address)]
Day = Annotated[str, Field(pattern=DAY_PATTERN), AfterValidator(_calendar_day)]
_INTERVAL_SCHEMA = {"type": "array", "minItems": 2, "maxItems": 2,
                    "items": {"type": "number", "minimum": 0, "maximum": 1}}
Intervals = Annotated[
    list[Any], AfterValidator(_interval_leaves),
    WithJsonSchema({"anyOf": [
        _INTERVAL_SCHEMA,
        {"type": "array", "items": _INTERVAL_SCHEMA},
        {"type": "array", "items": {"type": "array", "items": _INTERVAL_SCHEMA}}],
        "description": "[lo, hi] for every coefficient, one [lo, hi] per task type, or "
                       "one such list per human; bounds within [0, 1]"})]
# A list, as for every other list key: "mixed" alone is refused like kits = "2, 2".
TeamTypes = Annotated[list[Literal[TEAM_TYPES]],
                      Field(min_length=1, max_length=len(TEAM_TYPES)),
                      WithJsonSchema({"type": "array",
                                      "items": {"type": "string", "enum": list(TEAM_TYPES)},
                                      "minItems": 1, "maxItems": len(TEAM_TYPES),
                                      "uniqueItems": True})]


# --- [study], [cookies], [[themes]], [[conditions]] --------------------------------------


class StudySection(Strict):
    name: Identifier = Field(description="Short identifier; names the database "
                                         "var/<name>.sqlite and the exported files.")
    title: str = _text(200, "The study's title, shown on every page.")
    kits: list[Annotated[int, Field(ge=0, le=LIMITS["kits_per_type"])]] = Field(
        min_length=2, max_length=2,
        description="Kits per session for squares and letters; every round gives each of "
                    "the two humans one kit, so a session has sum(kits) / 2 rounds.")
    round_seconds: Seconds = Field(description="Length of a collaborative round.")
    practice_seconds: Seconds = Field(description="Length of a practice round.")
    practice: list[Literal[TASK_NAMES]] = Field(
        max_length=20,
        description="The practice rounds in order; at least two of each task, the second "
                    "of each measures the capability.")
    condition_order: Literal[CONDITION_ORDERS] = Field(
        "alternate", description="alternate: counterbalanced, each participant given the "
                                 "order fewest hold (every order of 2 or 3 conditions, a "
                                 "balanced Latin square of 4); fixed: always the listed "
                                 "order.")
    min_cookie_seconds: float = Field(
        0.5, ge=0, le=60, description="A cookie finished sooner than this after the previous "
                                      "one is refused as too fast.")
    theme_assignment: Literal[THEME_ASSIGNMENTS] = Field(
        "fixed", description="fixed: every participant decorates each cookie with the theme "
                             "of [cookies] (the paper); by-rating: after the theme ratings, "
                             "the theme a participant rates higher goes on the cookie named "
                             "by preferred_on, so their preference runs the way their role "
                             "needs (docs/protocol.md).")
    preferred_on: Literal[TASK_NAMES] | None = Field(
        None, description="by-rating: the cookie that carries the theme rated higher.")
    tied_ratings: Literal[TIED_RATINGS] = Field(
        "lowest-index", description="Equal theme ratings (tied preferences; by-rating keeps "
                                    "the [cookies] themes for them): lowest-index reads the "
                                    "tie as preferring squares (MODEL.md); unmatched gives "
                                    "the unmatched page once practice ends, before a team "
                                    "is formed; random draws the type read as preferred, "
                                    "recorded per participant (participants.tie_preferred).")
    clipped_capability: Literal[CLIPPED_CAPABILITY] = Field(
        "continue", description="A capability clipped at 0.01 or 0.99 is not a measurement "
                                "(MODEL.md): continue keeps the participant in the study "
                                "and the analysis leaves them out (the exclusion "
                                "clipped-capability); unmatched gives the unmatched page "
                                "once practice ends, before a team is formed on it; keep "
                                "(the paper's practice) keeps the clipped value for the "
                                "team and the robots, flagged, and the report gives every "
                                "confirmatory result with and without those participants.")
    agent_teammate: Literal[AGENT_TEAMMATE] = Field(
        "disclosed", description="How the pages present the agent teammate of a study "
                                 "without a [team]: disclosed says it is a computer agent "
                                 "and draws it as one; concealed presents it as a person "
                                 "in the room next door until the debrief discloses it "
                                 "(the paper's method with a confederate; only as an "
                                 "ethics board approved, docs/protocol.md).")


class CookieType(Strict):
    theme: Identifier = Field(description="The id of the theme decorated on this cookie.")
    reference_speed: float = Field(ge=REFERENCE_SPEEDS[0], le=REFERENCE_SPEEDS[1],
                                   description="Cookies per second that count as "
                                               "capability 1.")


class Cookies(Strict):
    squares: CookieType
    letters: CookieType


class Theme(Strict):
    id: Identifier
    name: str = _text(80, "The theme's name.")
    text: Annotated[str, AfterValidator(_has_letters)] = _text(
        24, "Spelled on letters cookies.")
    initials: str = Field(pattern=INITIALS_PATTERN, description="Drawn on squares cookies.")
    description: str = _text(2000, "Shown on the themes page.")
    colour: str = Field("#8b4513", pattern=COLOUR_PATTERN, description="Icing colour.")


def _pool_bounds(value: Any) -> Any:
    if isinstance(value, str) and value != "pool":
        raise ValueError('must be "pool" or [lo, hi]')
    return None if value == "pool" else value


FeaBounds = Annotated[
    Annotated[list[Annotated[float, Field(ge=0, le=1e6)]],
              Field(min_length=2, max_length=2)] | None,
    BeforeValidator(_pool_bounds),
    WithJsonSchema({"anyOf": [{"const": "pool"},
                              {"type": "array", "items": {"type": "number", "minimum": 0},
                               "minItems": 2, "maxItems": 2}]}),
]


class AlgorithmSection(Strict):
    """An algorithm declared as data (docs/model.md, Algorithms as data)."""

    id: Identifier = Field(description="The name conditions run it by (not a preset's).")
    terms: Annotated[
        dict[str, Annotated[float, Field(ge=0)]] | None,
        WithJsonSchema({"type": "object", "propertyNames": {"enum": list(TERMS)},
                        "additionalProperties": {"type": "number", "minimum": 0},
                        "minProperties": 1}),
    ] = Field(None, description="The goal reward's terms and their weights (>= 0, sum 1).")
    fea_bounds: FeaBounds = Field(None, description='With a fair_equity term: "pool" (the '
                                                    'bounds of [pool.fea]) or [lo, hi].')
    memory: Literal[MEMORY_SCOPES] | None = Field(
        None, description='"study": count the kits of the study\'s earlier sessions.')
    python: str | None = Field(None, pattern=PYTHON_PATTERN, max_length=200,
                               description="A vectorised goal reward, module:function, "
                                           "instead of terms.")
    python_seconds: float = Field(
        PYTHON_SECONDS, gt=0, le=PYTHON_SECONDS_LIMIT,
        description="With python: the time its import and each trial call on 64 teams "
                    "may take before study check refuses it.")


class Condition(Strict):
    id: Identifier
    algorithm: Identifier = Field(description="The allocation algorithm the robot runs: "
                                              "efficient, fair, fea or an [[algorithms]] id.")
    robot: str = Field(pattern=NAME_PATTERN, description="The robot's name, as participants "
                                                         "see it.")
    transparency: str = Field("", max_length=2000, description="Text explaining the robot's "
                                                               "allocations (may be empty).")
    round_order: Literal[ROUND_ORDERS] = Field(
        "default", description="Which round of a session gets which allocation.")
    w: float = Field(0.7, ge=0, le=1, description="FEA only: the weight of efficiency.")
    fea_bounds: FeaBounds = Field(None, json_schema_extra={"default": "pool"},
                                  description='FEA only: "pool" (the bounds derived from the '
                                              'pool) or [lo, hi].')


# --- [pages], [scales], [preferences], [questionnaires] ----------------------------------


class Page(Strict):
    title: str = _text(200, "The page's heading; {robot} names the current robot.")
    text: str = _text(LIMITS["text"], "The page's text; {robot} names the current robot, "
                                      "{robot:<condition id>} a given one.")


Pages = create_model("Pages", __base__=Strict,
                     **{name: (Page, Field(description=f"The {name} page.")) for name in PAGES},
                     **{name: (Page | None, Field(None, description=f"The {name} page ("
                                                  "protocols with a [team] only)."))
                        for name in TEAM_PAGES})


class Scale(Strict):
    points: int = Field(ge=2, le=11, description="Number of answer points.")
    anchors: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=11, description="Labels spread over the scale, first to "
                                                 "last; at most one per point.")


class Preferences(Strict):
    title: str = _text(200, "Heading of the theme rating page.")
    prompt: str = _text(2000, "The question asked for every theme.")
    scale: Identifier = Field(description="The scale (from [scales]) of the ratings.")


class ItemBase(Strict):
    id: Identifier
    label: str = Field("", max_length=80, description="Short name used in the analysis.")
    text: str = _text(2000, "The question.")
    required: bool = Field(True, description="Whether an answer is required.")


class LikertItem(ItemBase):
    kind: Literal["likert"]
    scale: Identifier = Field(description="The scale (from [scales]) of the answers.")


class ChoiceItem(ItemBase):
    kind: Literal["choice"]
    options: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=2, max_length=20, description="The answers to choose from.")


class NumberItem(ItemBase):
    kind: Literal["number"]
    min: float = Field(ge=-1e9, le=1e9, description="Smallest accepted answer.")
    max: float = Field(ge=-1e9, le=1e9, description="Largest accepted answer.")


class TextItem(ItemBase):
    kind: Literal["text"]
    required: bool = Field(False, description="Whether an answer is required.")
    max_length: int = Field(2000, ge=1, le=LIMITS["text"], description="Longest answer.")


class RankItem(ItemBase):
    """Every robot of the study put in order, first to last (post-study only)."""

    kind: Literal["rank"]


class PairwiseItem(ItemBase):
    """Every two robots of the study compared: which of the two (post-study only)."""

    kind: Literal["pairwise"]
    tie: str | None = Field(None, min_length=1, max_length=200, pattern=VISIBLE,
                            description="A third answer for each pair, that neither robot "
                                        "was better (e.g. \"No difference\"); without it "
                                        "each pair needs one of its two robots.")


Item = Annotated[LikertItem | ChoiceItem | NumberItem | TextItem | RankItem | PairwiseItem,
                 Field(discriminator="kind")]
ITEM_KINDS = ("likert", "choice", "number", "text", "rank", "pairwise")
# Item kinds whose answer covers every robot: asked once, after the last session.
ROBOT_ITEM_KINDS = ("rank", "pairwise")


class Questionnaire(Strict):
    title: str = _text(200, "The questionnaire's heading.")
    text: str = Field("", max_length=LIMITS["text"], description="Introductory text.")
    items: list[Item] = Field(min_length=1, max_length=LIMITS["items"])


class Questionnaires(Strict):
    session: Questionnaire = Field(description="Asked after each session, about its robot.")
    post: Questionnaire = Field(description="Asked once, after the last session; may rank "
                                            "(kind rank) or compare (kind pairwise) every "
                                            "robot.")


# --- [[probes]] ---------------------------------------------------------------------------

# Who a probe asks about: the person's own kits, or their teammates'.
PROBE_SUBJECTS = ("participant", "teammates")
EVERY_PATTERN = r"^every( [1-9][0-9]{0,2})?$"
MAX_PROBES = 10


def _after(value: Any) -> Any:
    """``after`` is "every", "every N" or a list of round numbers; which rounds a session
    has is checked against [study] kits (``checks``)."""
    if isinstance(value, str) and re.match(EVERY_PATTERN, value):
        return value
    if isinstance(value, list) and value and all(
            isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 999 for n in value):
        return value
    raise ValueError('must be "every", "every N" (N a whole number from 1) or a list of '
                     "round numbers from 1, like [2, 4]")


class Probe(Strict):
    """A one-tap question between collaborative rounds (docs/protocol.md, [[probes]])."""

    id: Identifier = Field(description="The probe's name in the data (probes.probe).")
    text: str = _text(2000, "The question, shown right after the round's result.")
    scale: Identifier = Field(description="The scale (from [scales]) of the answer buttons.")
    after: Annotated[
        str | list[int], BeforeValidator(_after),
        WithJsonSchema({"anyOf": [{"type": "string", "pattern": EVERY_PATTERN},
                                  {"type": "array", "minItems": 1,
                                   "items": {"type": "integer", "minimum": 1}}]}),
    ] = Field(description='Which rounds of a session it follows: "every", "every N" '
                          "(rounds N, 2N, ...) or a list of round numbers.")
    seconds: float = Field(gt=0, le=LIMITS["seconds"],
                           description="How long it stays open after the round closed; "
                                       "unanswered by then it is recorded as missed.")
    subject: Literal[PROBE_SUBJECTS] = Field(
        "participant", alias="for",
        description="participant: about the person's own kits; teammates: about their "
                    "teammates' kits.")


# --- [texts] ------------------------------------------------------------------------------


def _fills_in(key: str) -> AfterValidator:
    """An override may use its default's placeholders, no others (the page fills in only
    those); a singular (``<key>_one``) those of its plural."""
    allowed = allowed_placeholders(key)

    def check(value: str) -> str:
        unknown = sorted(placeholders(value) - allowed)
        if unknown:
            known = ", ".join(f"{{{name}}}" for name in sorted(allowed)) or "none"
            raise ValueError(f"{{{unknown[0]}}} is not filled in here (placeholders: {known})")
        return value
    return AfterValidator(check)


def _text_key(key: str) -> tuple[Any, Any]:
    if key == "language":
        return str | None, Field(None, pattern=LANGUAGE_PATTERN,
                                 json_schema_extra={"default": DEFAULT_TEXTS[key]},
                                 description="The pages' language (a BCP 47 tag).")
    return Annotated[str, _fills_in(key)] | None, _text(
        2000, f"Default: {DEFAULT_TEXTS[key]!r}", default=None)


Texts = create_model("Texts", __base__=Strict,
                     **{key: _text_key(key) for key in DEFAULT_TEXTS})  # type: ignore[call-overload]


# --- [recruitment], [analysis] -------------------------------------------------------------


class Bonus(Strict):
    """A bonus paid through the recruitment platform (docs/recruitment.md): for
    performance, for the wait in a [team]'s lobby, and for an end nobody chose."""

    per_cookie: float = Field(0.0, ge=0, le=100, description="Paid per cookie the "
                              "participant finished in the collaborative sessions.")
    per_team_cookie: float = Field(0.0, ge=0, le=100, description="Paid per cookie the team "
                                   "(participant and teammate) finished in those sessions.")
    cap: float | None = Field(None, ge=0, le=10_000, description="The most one participant "
                              "is paid, every reason together.")
    per_lobby_minute: float = Field(0.0, ge=0, le=100, description="Paid per minute a person "
                                    "waited in a [team]'s lobby, however the wait ended.")
    lobby_cap: float | None = Field(None, ge=0, le=10_000, description="The most paid for "
                                    "one person's wait in the lobby.")
    unmatched: float = Field(0.0, ge=0, le=1000, description="Paid to a participant for whom "
                             "no team or teammate could be formed (the unmatched page, after "
                             "the lobby or the teammate's choice).")
    teammate_dropped: float = Field(0.0, ge=0, le=1000, description="Paid once to each "
                                    "person still in a team when an agent took over a "
                                    "teammate's seat.")
    currency: str = Field("GBP", pattern=r"^[A-Z]{3}$", description="ISO 4217 code of the "
                          "amounts (the recruitment platform's study currency).")


def _id_pattern(value: str) -> str:
    problem = pattern_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


class End(Strict):
    """Where one way out of the study sends a participant (docs/recruitment.md)."""

    url: WebAddress | None = Field(None, description="The address the end page links to; "
                                   "{id} is replaced by the participant's recruitment id.")
    code: str | None = Field(None, pattern=COMPLETION_CODE_PATTERN,
                             description="A code the end page shows, to copy into the "
                                         "platform.")

    @model_validator(mode="after")
    def _url_or_code(self) -> End:
        if self.url is None and self.code is None:
            raise ValueError("needs a url, a code or both")
        return self


Outcomes = create_model("Outcomes", __base__=Strict, **{  # type: ignore[call-overload]
    name: (End | None, Field(None, description=f"A participant who {meaning}."))
    for name, meaning in OUTCOME_MEANINGS.items()})


class Recruitment(Strict):
    id_parameter: str | None = Field(
        None, pattern=PARAMETER_PATTERN,
        description="Query parameter of the start link carrying the platform's participant "
                    "id (e.g. PROLIFIC_PID); the same id resumes the same participant.")
    id_pattern: Annotated[str, AfterValidator(_id_pattern)] | None = Field(
        None, min_length=1, max_length=200,
        description="A regular expression every recruitment id must match as a whole; "
                    "default: the platform's id format by id_parameter (docs/recruitment.md).")
    completion_url: WebAddress | None = Field(
        None, description="Where the done page sends a participant who finished.")
    return_url: WebAddress | None = Field(
        None, description="Where a participant who declined, withdrew, was not matched or "
                          "was aborted is sent back to.")
    open_enrolment: bool = Field(
        True, description="Whether an unknown code (or /start) creates a participant; "
                          "false: links come from the console or a recruitment id.")
    unconsented_expiry_minutes: Minutes = Field(
        60, description="An enrolled participant who has not consented by then expires.")
    binding_idle_minutes: Minutes = Field(
        30, description="After this idle time another browser may take over a code.")
    outcomes: Outcomes = Field(  # type: ignore[valid-type]
        default_factory=Outcomes,
        description="A link or code per way out of the study; without one, finished uses "
                    "completion_url and the others return_url.")


class Analysis(Strict):
    exclude: list[Literal[EXCLUSION_RULES]] = Field(
        default_factory=list, max_length=len(EXCLUSION_RULES),
        description="Exclusion rules applied to every table, figure and test.")
    keep_completed_sessions_of_incomplete: bool = Field(
        True, description="Whether a participant who did not finish keeps the sessions they "
                          "completed in the analysis.")
    manipulation_check_item: Identifier | None = Field(
        None, description="Id of the post-study item asking whether the teammate was "
                          "believed to be a person.")
    manipulation_check_pass: list[Annotated[str, Field(min_length=1, max_length=200)]] = (
        Field(default_factory=list, max_length=20,
              description="The answers to manipulation_check_item that pass the check (for "
                          "a choice item, some of its options)."))


class Calibration(Strict):
    """Where calibrated values came from: written by ``study calibrate``, read by people
    and the analysis report (docs/pilot-to-study.md)."""

    pilot: str = _text(500, "The pilot database's file name.")
    pilot_sha256: str = Field(pattern=r"^[0-9a-f]{64}$",
                              description="SHA-256 of the pilot database.")
    participants: int = Field(ge=1, description="Pilot participants the values came from.")
    first: Day = Field(description="Day of the first pilot measurement (UTC).")
    last: Day = Field(description="Day of the last pilot measurement (UTC), not before "
                                  "first.")
    rule: str = _text(2000, "How the values were chosen.")
    changes: list[Annotated[str, Field(max_length=2000)]] = Field(
        max_length=20, description="Every value changed, as 'key: old -> new'.")
    typical: list[Annotated[float, Field(gt=0, le=1)]] | None = Field(
        None, min_length=2, max_length=2,
        description="The pilot's typical (geometric mean) capability per task type under the "
                    "calibrated reference speeds: where the protocol measures people, which "
                    "`study check` sets beside the paper's centres.")


# --- [pool] -----------------------------------------------------------------------------


class Sample(Strict):
    c: Intervals = Field(default_factory=lambda: [0.01, 0.99],
                         description="Capability ranges sampled uniformly.")
    p: Intervals = Field(default_factory=lambda: [0.01, 0.99],
                         description="Preference ranges sampled uniformly.")


class Criteria(Strict):
    c: Intervals | None = Field(None, description="Capability ranges a team must lie in.")
    p: Intervals | None = Field(None, description="Preference ranges a team must lie in.")
    team_types: TeamTypes | None = Field(None, description="Team types kept.")
    fair_gap_above: float | None = Field(None, ge=-1, le=1,
                                         description="Keep teams whose fair gap exceeds this.")


class Teammate(Criteria):
    role: Literal[ROLES] = Field("any", description="Which member the participant may be.")
    rule: Literal[TEAMMATE_RULES] = Field(
        "typed", description="typed: the nearest member whose live team with the participant "
                             "meets this filter and gives the two robots different plans; "
                             "distinct: the nearest member with which the robots differ; "
                             "nearest: the paper's Eq. 6 exactly.")
    unplaced: Literal[UNPLACED] = Field(
        "unmatched", description="A participant no member places in the target team (rule "
                                 "typed): unmatched page with the return link, or continue "
                                 "with the distinct choice, recorded as off target.")


class Fea(Strict):
    w: float = Field(0.7, ge=0, le=1, description="FEA's weight of efficiency.")
    bounds: list[Annotated[float, Field(ge=0, le=1e6)]] = Field(
        min_length=2, max_length=2, description="[lo, hi] scaling |FE|.")
    bounds_source: str = _text(500, "Where the bounds came from.")
    bounds_fixed: bool = Field(
        False, description="true: the bounds are set on purpose (e.g. the paper's, or a "
                           "pilot's people) and need not come from this pool; false: "
                           "bounds_source must cite the teams digest of the pool this "
                           "[pool] builds (study check and study serve refuse it otherwise).")


class PoolSection(Strict):
    teams: int = Field(ge=1, le=LIMITS["pool_teams"], description="Teams in the pool.")
    seed: int = Field(ge=0, le=2**63 - 1, description="Random seed of the pool.")
    humans: Literal[2, 3] = Field(2, description="Humans per team: two, or a [team]'s "
                                                 "seats.")
    kits: list[Annotated[int, Field(ge=0, le=LIMITS["kits_per_type"])]] = Field(
        default_factory=lambda: [8, 8], min_length=2, max_length=2,
        description="Kits per task type; must equal [study] kits.")
    algorithms: list[Identifier] = Field(
        default_factory=lambda: list(ALGORITHMS), min_length=1, max_length=len(ALGORITHMS) + 12,
        description="Algorithms solved for every pool team: presets and [[algorithms]] ids "
                    "(default: the presets and every declared algorithm).")
    most_capable_reading: Literal[MOST_CAPABLE_READINGS] = Field(
        MOST_CAPABLE_READINGS[0], description="Which human of a team counts as the most "
                                              "capable (docs/model.md, Team types).")
    sample: Sample = Field(default_factory=Sample)
    accept: Criteria = Field(default_factory=Criteria,
                             description="Rejection sampling: which drawn teams are kept.")
    fea: Fea | None = Field(None, description="FEA settings, when fea is among the "
                                              "algorithms.")
    teammate: Teammate = Field(default_factory=Teammate,
                               description="Which pool teams a participant may be matched to.")


# --- [team] -----------------------------------------------------------------------------


class Lobby(Strict):
    shared_seconds: float | None = Field(
        None, ge=0, le=LIMITS["seconds"], description="One timer per forming team, from its "
                                                      "first person's arrival (0: none).")
    individual_seconds: float | None = Field(
        None, ge=0, le=LIMITS["seconds"], description="Each person's own timer, from their "
                                                      "arrival (0: none).")
    on_timeout: Literal[LOBBY_TIMEOUTS] = Field(
        "agents", description="agents: start with the people present, agents from the pool "
                              "in the empty seats; unmatched: the unmatched page.")
    leave_after_seconds: float = Field(120, ge=0, le=LIMITS["seconds"],
                                       description="When the lobby's leave button appears.")


class TeamSection(Strict):
    seats: list[Literal[SEAT_KINDS]] = Field(min_length=2, max_length=3,
                                             description="The team's seats, person or agent.")
    formation: Literal[FORMATIONS] = Field(
        "arrival", description="arrival: the first people to arrive; traits: people whose "
                               "live team is of team_types.")
    team_types: TeamTypes | None = Field(None, description="traits: the live team types "
                                                           "the people must form.")
    grace_seconds: float = Field(45, gt=0, le=LIMITS["seconds"],
                                 description="A person whose page is closed longer is dropped.")
    break_seconds: float = Field(5, ge=0, le=LIMITS["seconds"],
                                 description="Between a team's rounds.")
    start_seconds: float = Field(180, gt=0, le=LIMITS["seconds"],
                                 description="A session starts without whoever is not there "
                                             "by then.")
    lobby: Lobby = Field(default_factory=Lobby)


# --- the file ---------------------------------------------------------------------------


class ProtocolFile(Strict):
    """A study protocol (TOML). See docs/protocol.md."""

    study: StudySection
    cookies: Cookies
    themes: list[Theme] = Field(min_length=1, max_length=12)
    algorithms: list[AlgorithmSection] = Field(
        default_factory=list, max_length=12,
        description="Algorithms declared as data; a condition runs one by its id.")
    conditions: list[Condition] = Field(
        min_length=MIN_CONDITIONS, max_length=MAX_CONDITIONS,
        description="The robots a participant meets, 2 to 4, one session each.")
    pages: Pages  # type: ignore[valid-type]
    scales: dict[Identifier, Scale] = Field(min_length=1, max_length=20)
    preferences: Preferences
    questionnaires: Questionnaires
    probes: list[Probe] = Field(
        default_factory=list, max_length=MAX_PROBES,
        description="One-tap questions between collaborative rounds, stored per person, "
                    "round and probe (docs/protocol.md).")
    texts: Texts = Field(default_factory=Texts,  # type: ignore[valid-type]
                         description="The page's own words (buttons, labels, timers, "
                                     "messages), each overriding its default.")
    recruitment: Recruitment = Field(default_factory=Recruitment)
    bonus: Bonus | None = Field(None, description="Performance bonus; `study export --bonus` "
                                                  "writes the platform's bulk bonus file.")
    analysis: Analysis = Field(default_factory=Analysis)
    pool: PoolSection
    team: TeamSection | None = Field(None, description="Real teams: several people under one "
                                                       "robot, formed in a lobby (docs/teams.md).")
    calibration: Calibration | None = Field(
        None, description="Provenance of calibrated values (written by study calibrate).")


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of a protocol file."""
    schema = _without_null(ProtocolFile.model_json_schema())
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def _without_null(node: Any) -> Any:
    """TOML has no null: an optional key is one left out, so the schema offers no null
    type and no null default to an editor."""
    if isinstance(node, list):
        return [_without_null(value) for value in node]
    if not isinstance(node, dict):
        return node
    node = {key: _without_null(value) for key, value in node.items()
            if not (key == "default" and value is None)}
    options = [option for option in node.get("anyOf", []) if option != {"type": "null"}]
    if "anyOf" in node and len(options) == 1:
        del node["anyOf"]
        node = {**options[0], **node}
    elif "anyOf" in node:
        node["anyOf"] = options
    return node
