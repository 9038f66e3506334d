"""What the protocol says about the analysis: rounds per session, conditions, the Likert
items, the manipulation-check item and the declared exclusion rules.

The protocol is read from the database's own snapshot (``server_runs``, taken at every
server start), so a report describes the study that was run even if the file changed
since; a file given on the command line stands in for a database without snapshots. The
``[analysis]`` section names the exclusion rules, so every table, figure and test uses one
analysis set decided before the data were seen, not improvised after.
"""

from __future__ import annotations

import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from study.allocation.model import InvalidInput
from study.allocation.terms import EXCLUSION_RULES, EXCLUSION_TEXT

DEFAULT_EXCLUDE = ("aborted", "incomplete")
CLIPPED_RULE = "clipped-capability"
TEAM_SIZE = 2  # the participant and the agent teammate


@dataclass(frozen=True)
class AnalysisRules:
    """The exclusion rules, in the order they are applied (a participant is counted under
    the first rule that removes them), and whether the completed sessions of a participant
    removed only for being incomplete stay in the session-level analyses."""

    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    keep_completed_sessions_of_incomplete: bool = True
    manipulation_check_item: str | None = None
    manipulation_check_pass: tuple[str, ...] = ()
    source: str = "defaults (the protocol declares no [analysis] section)"

    def __post_init__(self) -> None:
        unknown = [rule for rule in self.exclude if rule not in EXCLUSION_RULES]
        if unknown:
            raise InvalidInput("[analysis] exclude", ", ".join(unknown),
                               f"choose from {', '.join(EXCLUSION_RULES)}")

    def describe(self) -> str:
        """The rules as one sentence for the report."""
        rules = "; ".join(f"{rule} ({EXCLUSION_TEXT[rule]})" for rule in self.exclude) or "none"
        kept = ("kept" if self.keep_completed_sessions_of_incomplete else "not kept")
        return (f"Exclusion rules from {self.source}: {rules}. The completed sessions of a "
                f"participant removed only for being incomplete are {kept} in the "
                f"session-level analyses. A session that was not played to its last round "
                f"is never analysed, and never counted as zero.")


@dataclass(frozen=True)
class Item:
    """A questionnaire item as the analysis needs it."""

    id: str
    label: str
    kind: str
    options: tuple[str, ...] = ()
    points: int = 7


TEAMMATE_PRESENTATION = {
    "disclosed": "The pages said the teammate was a computer agent (agent_teammate = "
                 "disclosed). ",
    "concealed": "The pages presented the agent teammate as a person until the debrief "
                 "disclosed it (agent_teammate = concealed). ",
    "undeclared": "The protocol predates agent_teammate: its pages say how the agent "
                  "teammate was presented. ",
}


@dataclass(frozen=True)
class Design:
    """The study design from the protocol: what the report labels and tests by."""

    name: str | None = None
    rounds_per_session: int | None = None
    round_seconds: float | None = None
    conditions: tuple[str, ...] = ()
    session_items: tuple[Item, ...] = ()
    post_items: tuple[Item, ...] = ()
    rules: AnalysisRules = field(default_factory=AnalysisRules)
    source: str = "no protocol"
    tied_ratings: str = "lowest-index"  # what equal theme ratings led to ([study])
    clipped_capability: str = "continue"  # what a clipped capability led to ([study])
    # how the pages presented the agent teammate ([study]; None with a [team], whose pages
    # name every seat; "undeclared" for a protocol written before the key)
    agent_teammate: str | None = None
    real_teams: bool = False  # a [team]: people played together, teamed in the lobby

    @property
    def manipulation_check(self) -> Item | None:
        """The post-study item that checks the cover story, when the protocol names one."""
        wanted = self.rules.manipulation_check_item
        return next((item for item in self.post_items if item.id == wanted), None)

    def teammate_presentation(self) -> str:
        """What the participants were told of their agent teammate, for the report."""
        return TEAMMATE_PRESENTATION.get(self.agent_teammate or "", "")

    def rounds_label(self) -> str:
        return f"of {self.rounds_per_session}" if self.rounds_per_session else "per session"


def _items(section: Mapping[str, Any], scales: Mapping[str, Any]) -> tuple[Item, ...]:
    items = []
    for raw in section.get("items", []):
        scale = scales.get(raw.get("scale", ""), {})
        items.append(Item(str(raw["id"]), str(raw.get("label", raw["id"])),
                          str(raw.get("kind", "")), tuple(raw.get("options", ())),
                          int(scale.get("points", 7))))
    return tuple(items)


def _attribute_rules(protocol: Any) -> AnalysisRules | None:
    """The rules from a loaded protocol's ``analysis`` attribute, where it has one."""
    section = getattr(protocol, "analysis", None)
    if section is None:
        return None
    return AnalysisRules(
        exclude=tuple(getattr(section, "exclude", DEFAULT_EXCLUDE)),
        keep_completed_sessions_of_incomplete=bool(getattr(
            section, "keep_completed_sessions_of_incomplete", True)),
        manipulation_check_item=getattr(section, "manipulation_check_item", None),
        manipulation_check_pass=tuple(getattr(section, "manipulation_check_pass", ()) or ()),
        source="the protocol's [analysis] section")


def rules_from_table(table: Mapping[str, Any] | None) -> AnalysisRules:
    """The rules from a raw ``[analysis]`` TOML table (defaults where it is silent)."""
    if not table:
        return AnalysisRules()
    return AnalysisRules(
        exclude=tuple(table.get("exclude", DEFAULT_EXCLUDE)),
        keep_completed_sessions_of_incomplete=bool(table.get(
            "keep_completed_sessions_of_incomplete", True)),
        manipulation_check_item=table.get("manipulation_check_item"),
        manipulation_check_pass=tuple(table.get("manipulation_check_pass", ())),
        source="the protocol's [analysis] section")


def loaded_protocol(text: str) -> Any | None:
    """The protocol object of ``text`` through the study's own loader, or None when the
    text does not load (an older protocol version, for example)."""
    from study.protocol.loader import load_protocol

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "protocol.toml"
        path.write_text(text, encoding="utf-8")
        try:
            return load_protocol(path)
        except ValueError:
            return None


def design_from_text(text: str, source: str) -> Design:
    """The design of a protocol's TOML text."""
    raw = tomllib.loads(text)
    study = raw.get("study", {})
    scales = raw.get("scales", {})
    questionnaires = raw.get("questionnaires", {})
    kits = study.get("kits")
    rules = AnalysisRules()
    if "analysis" in raw:
        rules = (_attribute_rules(loaded_protocol(text))
                 or rules_from_table(raw["analysis"]))
    clipped = str(study.get("clipped_capability", "continue"))
    rules = with_clipped_exclusion(rules, clipped)
    rounds = int(sum(kits)) // TEAM_SIZE if kits else None  # every round gives each a kit
    return Design(name=study.get("name"), rounds_per_session=rounds,
                  round_seconds=study.get("round_seconds"),
                  conditions=tuple(c["id"] for c in raw.get("conditions", [])),
                  session_items=_items(questionnaires.get("session", {}), scales),
                  post_items=_items(questionnaires.get("post", {}), scales),
                  rules=rules, source=source,
                  tied_ratings=str(study.get("tied_ratings", "lowest-index")),
                  clipped_capability=clipped,
                  agent_teammate=(None if "team" in raw
                                  else str(study.get("agent_teammate", "undeclared"))),
                  real_teams="team" in raw)


def with_clipped_exclusion(rules: AnalysisRules, consequence: str) -> AnalysisRules:
    """Under ``clipped_capability = "continue"`` a participant measured at a clip bound
    played on a value that is not theirs, and the protocol's declared consequence is that
    the analysis leaves them out: the rule ``clipped-capability`` applies whether or not
    ``[analysis]`` lists it (after the listed rules when it does not). Under ``"keep"``
    they stay in the analysis set, and the report gives its confirmatory results without
    them too (``without_clipped``)."""
    if consequence != "continue":
        return rules
    return _excluding_clipped(rules, '[study] clipped_capability = "continue"')


def without_clipped(design: Design) -> Design:
    """The design whose analysis set is the declared one without the participants with a
    clipped capability: ``clipped_capability = "keep"`` analyses them, and every
    confirmatory result is reported with and without them (MODEL.md)."""
    return replace(design, rules=_excluding_clipped(
        design.rules, 'the results without the clipped (clipped_capability = "keep")'))


def _excluding_clipped(rules: AnalysisRules, why: str) -> AnalysisRules:
    """``rules`` with ``clipped-capability`` applied after the listed rules, unless listed."""
    if CLIPPED_RULE in rules.exclude:
        return rules
    return replace(rules, exclude=(*rules.exclude, CLIPPED_RULE),
                   source=f"{rules.source} and {why}")


def study_design(protocol_texts: Mapping[str, str], protocol_file: Path | None = None,
                 rules: AnalysisRules | None = None) -> Design:
    """The design from a protocol file if given, else from the database's snapshot; an
    explicit ``rules`` overrides the protocol's."""
    if protocol_file is not None:
        design = design_from_text(protocol_file.read_text(encoding="utf-8"),
                                  f"the protocol file {protocol_file}")
    elif len(protocol_texts) == 1:
        (name, text), = protocol_texts.items()
        design = design_from_text(text, f"the database's snapshot of protocol {name!r}")
    else:
        design = Design()
    if rules is not None:
        design = Design(**{**design.__dict__, "rules": rules})
    return design


def manipulation_passed(item: Item, answers: Sequence[Any],
                        passing: Sequence[str] = ()) -> list[bool | None]:
    """Whether each answer passes the manipulation check (None: not answered).

    With ``passing`` given, an answer passes when it is one of them; otherwise a choice
    item passes on its first option (the believing answer is listed first) and a Likert
    item above the middle of its scale.
    """
    result: list[bool | None] = []
    for answer in answers:
        if answer is None or (isinstance(answer, float) and answer != answer):
            result.append(None)
        elif passing:
            result.append(str(answer) in passing or _number(answer) in _numbers(passing))
        elif item.kind == "likert":
            result.append(float(answer) > (item.points + 1) / 2)
        else:
            result.append(bool(item.options) and str(answer) == item.options[0])
    return result


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _numbers(values: Sequence[str]) -> set[float]:
    return {number for number in map(_number, values) if number is not None}
