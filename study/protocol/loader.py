"""The study protocol: one declarative TOML file per study, validated on load.

Every text a participant reads (consent, theme information, questionnaire items, robot
names, transparency texts) lives in the protocol, so a study is changed by editing one file
and the templates stay generic. ``load_protocol`` is the one check every command runs
(``study check``, ``study serve``): the schema of ``study.protocol.schema`` (unknown keys,
types, sane finite ranges), then the checks relating parts to each other
(``study.protocol.checks``), then the ``[pool]`` section as ``study.pool`` reads it. Every
error names the file, the line and the field, and only the first (by line) is raised,
with a count of the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from study.allocation.terms import DeclaredAlgorithm
from study.protocol import schema
from study.protocol.checks import (
    ROBOT_PLACEHOLDER,
    Problem,
    code_problems,
    cross_problems,
    schema_problems,
)
from study.protocol.recruitment import OUTCOMES, EndLink, IdFormat, id_format
from study.protocol.schema import (
    CONDITION_ORDERS,
    EXCLUSION_RULES,
    ITEM_KINDS,
    PAGES,
    ROUND_ORDERS,
    TASK_NAMES,
    TEAM_PAGES,
)
from study.protocol.texts import DEFAULT_TEXTS, default_texts
from study.protocol.toml_source import ProtocolError, TomlSource

if TYPE_CHECKING:
    from study.protocol.pool_spec import PoolSpec

__all__ = ["CONDITION_ORDERS", "EXCLUSION_RULES", "ITEM_KINDS", "PAGES", "ROUND_ORDERS",
           "TASK_NAMES", "AnalysisRules", "Protocol", "ProtocolError", "Recruitment",
           "load_protocol", "parse_protocol", "preference_coefficient"]

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
    declared: DeclaredAlgorithm | None = None  # the [[algorithms]] table it runs, if any


@dataclass(frozen=True)
class Scale:
    points: int
    anchors: tuple[str, ...]


@dataclass(frozen=True)
class Item:
    """A questionnaire item; ``options`` only for choices, ``minimum/maximum`` for numbers,
    ``tie`` for a pairwise comparison's third answer (kinds rank and pairwise are about
    every robot of the study)."""

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
    tie: str | None = None


@dataclass(frozen=True)
class Questionnaire:
    title: str
    text: str
    items: tuple[Item, ...]


@dataclass(frozen=True)
class Probe:
    """A one-tap question asked after some collaborative rounds (``[[probes]]``): ``every``
    N rounds (N, 2N, ...), or after the ``rounds`` listed."""

    id: str
    text: str
    scale: Scale
    seconds: float
    every: int | None = None
    rounds: tuple[int, ...] = ()
    subject: str = "participant"

    def due_after(self, number: int) -> bool:
        """Whether the probe is asked once round ``number`` of a session closed."""
        return number % self.every == 0 if self.every else number in self.rounds


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
    id_pattern: str | None = None  # as declared; ``id_format`` adds the platform's default
    outcomes: dict[str, EndLink] = field(default_factory=dict)  # as declared

    @property
    def id_format(self) -> IdFormat | None:
        """The ids a start link may carry (None: the protocol takes no recruitment id)."""
        if self.id_parameter is None:
            return None
        return id_format(self.id_parameter, self.id_pattern)

    def end(self, outcome: str) -> EndLink:
        """The link or code of a way out of the study: the declared one, else
        ``completion_url`` for a participant who finished and ``return_url`` for the rest
        (so protocols written before ``[recruitment.outcomes]`` keep working)."""
        declared = self.outcomes.get(outcome)
        if declared is not None:
            return declared
        return EndLink(self.completion_url if outcome == "finished" else self.return_url)


@dataclass(frozen=True)
class AnalysisRules:
    """The analysis set, declared before the data are seen (``[analysis]``)."""

    exclude: tuple[str, ...] = ()
    keep_completed_sessions_of_incomplete: bool = True
    manipulation_check_item: str | None = None
    manipulation_check_pass: tuple[str, ...] = ()


@dataclass(frozen=True)
class TeamDesign:
    """A ``[team]``: its seats, how the lobby forms it, its timers (docs/teams.md)."""

    seats: tuple[str, ...]
    formation: str
    team_types: tuple[str, ...]
    grace_seconds: float
    break_seconds: float
    start_seconds: float
    shared_seconds: float | None
    individual_seconds: float | None
    on_timeout: str
    leave_after_seconds: float

    @property
    def humans(self) -> int:
        return len(self.seats)

    @property
    def persons(self) -> int:
        return self.seats.count("person")


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
    theme_assignment: str
    preferred_on: int | None
    themes: tuple[Theme, ...]
    conditions: tuple[Condition, ...]
    pages: dict[str, Page]
    preference_scale: Scale
    preference_title: str
    preference_prompt: str
    session_questionnaire: Questionnaire
    post_questionnaire: Questionnaire
    pool: PoolSpec = field(repr=False, compare=False)
    recruitment: Recruitment = field(default_factory=Recruitment)
    analysis: AnalysisRules = field(default_factory=AnalysisRules)
    bonus: schema.Bonus | None = None
    texts: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_TEXTS))
    extra: dict[str, Any] = field(default_factory=dict)
    team: TeamDesign | None = None
    algorithms: tuple[DeclaredAlgorithm, ...] = ()
    tied_ratings: str = "lowest-index"  # what equal theme ratings lead to (docs/protocol.md)
    clipped_capability: str = "continue"  # what a capability clipped at 0.01 or 0.99 leads to
    # A calibrated protocol's pilot: its people and their typical capability per type
    # ([calibration] typical), or None where the reference speeds are the human model's.
    calibrated: tuple[int, tuple[float, ...]] | None = None
    agent_teammate: str = "disclosed"  # how the pages present the agent teammate
    probes: tuple[Probe, ...] = ()  # asked between collaborative rounds

    @property
    def open_enrolment(self) -> bool:
        """Whether an unknown code or ``/start`` creates a participant."""
        return self.recruitment.open_enrolment

    @property
    def humans(self) -> int:
        """Humans the robot allocates to: a [team]'s seats, else the participant and the
        agent teammate."""
        return self.team.humans if self.team else 2

    @property
    def rounds(self) -> int:
        """Collaborative rounds per session: every human gets one kit a round."""
        return sum(self.kits) // self.humans

    @property
    def sessions(self) -> int:
        """Collaborative sessions: one per condition (2 to 4)."""
        return len(self.conditions)

    def theme(self, theme_id: str) -> Theme:
        return next(t for t in self.themes if t.id == theme_id)

    def condition(self, condition_id: str) -> Condition:
        return next(c for c in self.conditions if c.id == condition_id)

    def declared(self, algorithm_id: str) -> DeclaredAlgorithm | None:
        """The ``[[algorithms]]`` table of that id; None for a preset or an unknown name."""
        return next((a for a in self.algorithms if a.id == algorithm_id), None)

    def theme_of(self, task_type: int) -> Theme:
        return self.theme(self.cookies[task_type].theme)

    def assign_themes(self, ratings: dict[str, int]) -> tuple[tuple[str, ...], str]:
        """The theme of each cookie type for a participant who gave ``ratings``, and the
        rule that decided it: ``fixed`` ([cookies]), ``by-rating`` (the theme rated higher
        on ``preferred_on``) or ``tied`` (equal ratings keep [cookies])."""
        fixed = tuple(cookie.theme for cookie in self.cookies)
        if self.theme_assignment == "fixed":
            return fixed, "fixed"
        assert self.preferred_on is not None  # the loader checks it
        other = 1 - self.preferred_on
        ranked = sorted(fixed, key=lambda theme: -ratings[theme])
        if ratings[fixed[0]] == ratings[fixed[1]]:
            return fixed, "tied"
        themes = [""] * len(fixed)
        themes[self.preferred_on], themes[other] = ranked
        return tuple(themes), "by-rating"

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

    def pool_spec(self) -> PoolSpec:
        """The ``[pool]`` section as ``study.pool.PoolSpec`` read it when the protocol was
        validated."""
        return self.pool


def load_protocol(path: Path | str) -> Protocol:
    """Read and validate a protocol file; raises ``ProtocolError`` naming line and field."""
    return _validate(TomlSource.read(path))


def parse_protocol(text: str, path: Path | str = "<protocol>") -> Protocol:
    """Validate protocol text (tests and tools that hold the text in memory)."""
    return _validate(TomlSource.parse(text, path))


def _validate(source: TomlSource) -> Protocol:
    try:
        document = schema.ProtocolFile.model_validate(source.data)
    except ValidationError as error:
        raise _first(source, schema_problems(error)) from None
    problems = list(cross_problems(document, source.data))
    if not problems:  # goal rewards given as code are tried once the rest is valid
        problems = list(code_problems(document, source.path.parent))
    if problems:
        raise _first(source, problems)
    return _build(document, source.path, _pool_spec(source))


def _first(source: TomlSource, problems: list[Problem]) -> ProtocolError:
    """The problem written first in the file, saying how many more there are."""
    ordered = sorted(problems, key=lambda problem: source.line_of(problem[0]))
    dotted, message = ordered[0]
    if len(ordered) > 1:
        others = len(ordered) - 1
        message += f" (and {others} more problem{'s' if others > 1 else ''})"
    return source.error(dotted, message)


def _pool_spec(source: TomlSource) -> PoolSpec:
    """The ``[pool]`` section as the pool builder reads it (interval shapes, overlaps)."""
    from study.protocol.pool_spec import parse_pool

    return parse_pool(source.data["pool"], source.error, name=source.path.stem,
                      declared=source.data.get("algorithms", []), folder=source.path.parent)


# --- the validated document as the study reads it ---------------------------------------


def _build(doc: schema.ProtocolFile, path: Path, pool: PoolSpec) -> Protocol:
    declared = tuple(_declared(a, path.parent) for a in doc.algorithms)
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
        theme_assignment=doc.study.theme_assignment,
        preferred_on=(None if doc.study.preferred_on is None
                      else TASK_NAMES.index(doc.study.preferred_on)),
        tied_ratings=doc.study.tied_ratings,
        clipped_capability=doc.study.clipped_capability,
        agent_teammate=doc.study.agent_teammate,
        themes=themes,
        conditions=tuple(_condition(c, declared) for c in doc.conditions),
        algorithms=declared,
        pages={name: Page(page.title, page.text) for name in (*PAGES, *TEAM_PAGES)
               if (page := getattr(doc.pages, name)) is not None},
        preference_scale=scales[doc.preferences.scale],
        preference_title=doc.preferences.title,
        preference_prompt=doc.preferences.prompt,
        session_questionnaire=_questionnaire(doc.questionnaires.session, scales),
        post_questionnaire=_questionnaire(doc.questionnaires.post, scales),
        probes=tuple(_probe(probe, scales) for probe in doc.probes),
        pool=pool,
        recruitment=_recruitment(doc.recruitment),
        bonus=doc.bonus,
        texts={**default_texts(doc.study.agent_teammate),
               **doc.texts.model_dump(exclude_none=True)},
        team=_team(doc.team),
        analysis=AnalysisRules(tuple(doc.analysis.exclude),
                               doc.analysis.keep_completed_sessions_of_incomplete,
                               doc.analysis.manipulation_check_item,
                               tuple(doc.analysis.manipulation_check_pass)),
        calibrated=(None if doc.calibration is None or doc.calibration.typical is None
                    else (doc.calibration.participants, tuple(doc.calibration.typical))),
    )


def _team(section: schema.TeamSection | None) -> TeamDesign | None:
    if section is None:
        return None
    lobby = section.lobby
    return TeamDesign(tuple(section.seats), section.formation, tuple(section.team_types or ()),
                      float(section.grace_seconds), float(section.break_seconds),
                      float(section.start_seconds), lobby.shared_seconds or None,
                      lobby.individual_seconds or None, lobby.on_timeout,
                      float(lobby.leave_after_seconds))


def _recruitment(section: schema.Recruitment) -> Recruitment:
    declared = ((name, getattr(section.outcomes, name)) for name in OUTCOMES)
    outcomes = {name: EndLink(end.url, end.code) for name, end in declared if end is not None}
    return Recruitment(section.id_parameter, section.completion_url, section.return_url,
                       section.open_enrolment, float(section.unconsented_expiry_minutes),
                       float(section.binding_idle_minutes), section.id_pattern, outcomes)


def _declared(section: schema.AlgorithmSection, folder: Path) -> DeclaredAlgorithm:
    bounds = section.fea_bounds
    return DeclaredAlgorithm(
        section.id, tuple((name, float(weight)) for name, weight in (section.terms or {}).items()),
        None if bounds is None else (float(bounds[0]), float(bounds[1])),
        section.memory == "study", section.python, str(folder))


def _condition(condition: schema.Condition,
               declared: tuple[DeclaredAlgorithm, ...]) -> Condition:
    bounds = condition.fea_bounds
    return Condition(condition.id, condition.algorithm, condition.robot,
                     condition.transparency, condition.round_order, float(condition.w),
                     None if bounds is None else (float(bounds[0]), float(bounds[1])),
                     next((a for a in declared if a.id == condition.algorithm), None))


def _questionnaire(section: schema.Questionnaire, scales: dict[str, Scale]) -> Questionnaire:
    return Questionnaire(section.title, section.text,
                         tuple(_item(item, scales) for item in section.items))


def _probe(probe: schema.Probe, scales: dict[str, Scale]) -> Probe:
    after = probe.after
    every = None if isinstance(after, list) else int(after.removeprefix("every").strip() or 1)
    return Probe(probe.id, probe.text, scales[probe.scale], float(probe.seconds), every,
                 tuple(after) if isinstance(after, list) else (), probe.subject)


def _item(item: Any, scales: dict[str, Scale]) -> Item:
    common = {"id": item.id, "label": item.label, "text": item.text, "kind": item.kind,
              "required": item.required}
    if isinstance(item, schema.LikertItem):
        return Item(**common, scale=scales[item.scale])
    if isinstance(item, schema.ChoiceItem):
        return Item(**common, options=tuple(item.options))
    if isinstance(item, schema.NumberItem):
        return Item(**common, minimum=float(item.min), maximum=float(item.max))
    if isinstance(item, schema.PairwiseItem):
        return Item(**common, tie=item.tie)
    if isinstance(item, schema.RankItem):
        return Item(**common)
    return Item(**common, max_length=item.max_length)


def preference_coefficient(rating: int, points: int) -> float:
    """A rating on a ``points``-point scale mapped onto [0.01, 0.99] (MODEL.md)."""
    return 0.01 + 0.98 * (rating - 1) / (points - 1)
