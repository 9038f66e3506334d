"""``study check``: validate a protocol and print a summary of the study it describes.

The check is ``load_protocol`` and ``refuse_stale_bounds``, the same ones ``study serve``
runs before it starts, so a protocol that passes here is one the server accepts.
``--schema`` writes the protocol's JSON Schema (published as ``docs/protocol.schema.json``)
for editors that check TOML.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "check", help="validate a protocol and summarise its study",
        description="Validate protocol files (every key, type and range, and how the parts "
                    "relate) and print the study each describes. Exits 2 with the first "
                    "problem, named by file, line and field.")
    parser.add_argument("protocols", nargs="*", type=Path, metavar="PROTOCOL",
                        help="protocol files to check")
    parser.add_argument("--schema", nargs="?", const="-", metavar="FILE",
                        help="write the protocol JSON Schema to FILE (stdout without FILE)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from study.allocation.terms import InvalidInput
    from study.protocol.loader import load_protocol

    if args.schema is None and not args.protocols:
        raise InvalidInput("PROTOCOL", None, "name a protocol file to check, or --schema")
    if args.schema is not None and not (args.schema == "-" or args.schema.endswith(".json")):
        raise InvalidInput("--schema", args.schema, "the schema is written to a .json file "
                                                    "(protocols come after it)")
    if args.schema is not None:
        write_schema(args.schema)
    for path in args.protocols:
        protocol = load_protocol(path)
        refuse_stale_bounds(protocol)
        print("\n".join(summary(protocol)))
    return 0


def refuse_stale_bounds(protocol: Any, source: Any = None) -> None:
    """Refuse FEA bounds that are not those of the pool the protocol builds (their
    ``bounds_source`` cites other teams, or none) unless ``bounds_fixed`` says they are
    set on purpose: a pool served with another pool's bounds scales ``|FE|`` by numbers
    that are not its own, and nothing else would say so. ``study serve`` runs it too.
    ``source``: the protocol's ``TomlSource`` when it is not read from its path."""
    problem = protocol.pool_spec().stale_bounds()
    if problem is not None:
        from study.protocol.toml_source import TomlSource

        raise (source or TomlSource.read(protocol.path)).error("pool.fea.bounds_source",
                                                               problem)


def schema_text() -> str:
    """The JSON Schema exactly as published in ``docs/protocol.schema.json``."""
    import json

    from study.protocol.schema import json_schema

    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def write_schema(target: str) -> None:
    if target == "-":
        print(schema_text(), end="")
    else:
        Path(target).write_text(schema_text(), encoding="utf-8")
        print(f"protocol JSON Schema -> {target}")


def summary(protocol: Any) -> list[str]:
    """Readable lines describing the study a valid protocol sets up."""
    from study.protocol.recruitment import bonus_summary

    rows = [
        ("conditions", _conditions(protocol)),
        *([("algorithms", _algorithms(protocol))] if protocol.algorithms else []),
        ("sessions", _sessions(protocol)),
        ("practice", _practice(protocol)),
        ("cookies", "; ".join(f"{c.name}: theme {c.theme}, {c.reference_speed:g} cookies/s "
                              "= capability 1" for c in protocol.cookies)),
        ("scale", _scale(protocol)),
        ("clipped", _clipped(protocol.clipped_capability)),
        ("themes", _themes(protocol)),
        ("too fast", f"a cookie within {protocol.min_cookie_seconds:g} s of the previous "
                     "one is refused"),
        ("pool", _pool(protocol)),
        ("team", _team(protocol.team, protocol.pages)) if protocol.team
        else ("teammate", _teammate(protocol)),
        ("solver", _solver(protocol)),
        ("recruitment", _recruitment(protocol.recruitment)),
        ("ends", _ends(protocol.recruitment)),
        ("bonus", bonus_summary(protocol.bonus) if protocol.bonus else "none"),
        ("analysis", _analysis(protocol.analysis)),
        ("preferences", f"{len(protocol.themes)} themes rated on a "
                        f"{protocol.preference_scale.points}-point scale"),
        ("session items", _items(protocol.session_questionnaire)),
        ("post items", _items(protocol.post_questionnaire)),
    ]
    width = max(len(label) for label, _ in rows)
    return [f"{protocol.path}: valid protocol '{protocol.name}' ({protocol.title})",
            *(f"  {label:<{width}}  {text}" for label, text in rows), *_off_scale(protocol),
            *_warnings(protocol)]


def _warnings(protocol: Any) -> list[str]:
    """What the protocol does that its author likely did not mean, at its line, as an
    error would be named."""
    from study.protocol.checks import protocol_warnings
    from study.protocol.toml_source import TomlSource

    found = list(protocol_warnings(protocol))
    if not found:
        return []
    source = TomlSource.read(protocol.path)
    return [f"  WARNING: {source.path}:{source.line_of(dotted)}: {dotted}: {message}"
            for dotted, message in found]


def _conditions(protocol: Any) -> str:
    from study.protocol import orders

    robots = "; ".join(f"{c.id}: Robot {c.robot} runs {c.algorithm}"
                       + (f" (w {c.w:g})" if c.algorithm == "fea" else "")
                       for c in protocol.conditions)
    ids = [condition.id for condition in protocol.conditions]
    order = orders.describe(orders.counterbalanced(ids, protocol.condition_order),
                            protocol.condition_order)
    return f"{robots}; {order}"


def _algorithms(protocol: Any) -> str:
    """The declared algorithms: their weighted terms (or code), bounds and memory."""
    parts = []
    for algorithm in protocol.algorithms:
        reward = (f"code {algorithm.python}" if algorithm.python else
                  " + ".join(f"{weight:g} {name}" for name, weight in algorithm.terms))
        if any(name == "fair_equity" for name, _ in algorithm.terms):
            bounds = algorithm.fea_bounds
            reward += (" (bounds of [pool.fea])" if bounds is None
                       else f" (bounds [{bounds[0]:g}, {bounds[1]:g}])")
        memory = "; memory over the study" if algorithm.memory else ""
        parts.append(f"{algorithm.id} = {reward}{memory}")
    return "; ".join(parts)


def _scale(protocol: Any) -> str:
    """Where the protocol's typical person (its pilot's, else the human model's) measures
    under the reference speeds, beside the paper's centres: the robots' choices depend on
    the scale (MODEL.md)."""
    from study.people.scale import protocol_scale

    return protocol_scale(protocol).describe()


def _off_scale(protocol: Any) -> list[str]:
    """A warning for a scale off the paper's, where the paper's robots choose other goals,
    with the weight each FEA robot amounts to on the paper's scale."""
    from study.people.scale import OFF_SCALE, protocol_scale, weight_on_paper_scale
    from study.pool.scale import fea_weight

    scale = protocol_scale(protocol)
    if not scale.off:
        return []
    factors = ", ".join(f"{cookie.name} x{k:.2f}" for cookie, k in zip(
        protocol.cookies, scale.factors, strict=True))
    robots = [(c.id, c.w) for c in protocol.conditions
              if c.declared is None and c.algorithm == "fea"]
    robots += [(a.id, w) for a in protocol.algorithms if (w := fea_weight(a.terms)) is not None]
    weights = "".join(f"; {name}: FEA w = {w:g} acts as the paper's FEA at w = "
                      f"{weight_on_paper_scale(w, scale.factor):.2f}" for name, w in robots)
    return [f"  WARNING: the capability scale is more than {OFF_SCALE:.0%} off the paper's "
            f"({factors}): the paper's robots choose other goals on it (`study contrast` "
            f"counts how often){weights}"]


def _sessions(protocol: Any) -> str:
    kits = ", ".join(f"{c.name} {k}" for c, k in zip(protocol.cookies, protocol.kits,
                                                      strict=True))
    minutes = protocol.sessions * protocol.rounds * protocol.round_seconds / 60
    return (f"{protocol.sessions} sessions of {protocol.rounds} rounds x "
            f"{protocol.round_seconds:g} s "
            f"({minutes:.1f} min of rounds); kits a session: {kits}")


def _practice(protocol: Any) -> str:
    names = ", ".join(protocol.cookies[t].name for t in protocol.practice)
    measured = ", ".join(str(n) for n in sorted(protocol.measured_practice_rounds().values()))
    return (f"{len(protocol.practice)} rounds x {protocol.practice_seconds:g} s: {names} "
            f"(rounds {measured} measure the capability)")


def _pool(protocol: Any) -> str:
    spec = protocol.pool_spec()
    parts = [f"{spec.teams:,} teams (seed {spec.seed}), kits {list(spec.kits)}, "
             f"solved with {', '.join(spec.algorithms)}",
             f"kept: {spec.accept.describe()}",
             f"teammate: {spec.teammate.describe()}"]
    if spec.fea is not None:
        parts.append(f"FEA w {spec.fea.w:g}, bounds [{spec.fea.lo:.3g}, {spec.fea.hi:.3g}]")
    return "; ".join(parts)


def _themes(protocol: Any) -> str:
    if protocol.theme_assignment == "fixed":
        return "fixed: every participant decorates each cookie with its [cookies] theme"
    preferred = protocol.cookies[protocol.preferred_on].name
    return (f"by rating: the theme a participant rates higher goes on {preferred}; equal "
            "ratings keep the [cookies] themes")


def _team(team: Any, pages: dict[str, Any]) -> str:
    """A [team]'s seats, how the lobby forms it, its timers and its fallback, and the
    versions of its team page (who is in the team: people, agents)."""
    from study.protocol.schema import TEAM_PAGES
    formed = ("by arrival" if team.formation == "arrival"
              else f"by traits into {'/'.join(team.team_types)}")
    timers = "; ".join(f"{name} {seconds:g} s" for name, seconds in (
        ("shared", team.shared_seconds), ("individual", team.individual_seconds)) if seconds)
    fallback = {"agents": "agents from the pool fill the empty seats",
                "unmatched": "the unmatched page"}[team.on_timeout]
    return (f"{team.humans} seats ({', '.join(team.seats)}), {formed}; lobby timers {timers}, "
            f"then {fallback}; a page closed {team.grace_seconds:g} s hands the seat to an "
            f"agent; team pages {', '.join(name for name in TEAM_PAGES[1:] if name in pages)}")


def _teammate(protocol: Any) -> str:
    teammate = protocol.pool_spec().teammate
    rule = {"typed": "the nearest member whose live team meets the filter and gives the "
                     "robots different plans",
            "distinct": "the nearest member with which the robots' plans differ",
            "nearest": "the nearest member (the paper's Eq. 6)"}[teammate.rule]
    unplaced = {"unmatched": "the unmatched page",
                "continue": "the distinct choice, recorded as off target"}[teammate.unplaced]
    tail = f"; a participant it cannot place gets {unplaced}" if teammate.rule == "typed" \
        else ""
    shown = {"disclosed": "the pages say it is a computer agent",
             "concealed": "the pages present it as a person in the room next door until "
                          "the debrief discloses it (deception: as an ethics board "
                          "approved)"}[protocol.agent_teammate]
    return f"rule {teammate.rule}: {rule}{tail}; {shown}"


def _solver(protocol: Any) -> str:
    from study.protocol.checks import solver_size

    return solver_size(protocol.kits, protocol.pool_spec().teams).describe()


def _recruitment(recruitment: Any) -> str:
    enrolment = "open enrolment" if recruitment.open_enrolment else (
        "no open enrolment (links from the console or a recruitment id)")
    expected = recruitment.id_format
    parts = [enrolment,
             f"id parameter {recruitment.id_parameter or '-'}"
             + (f" (ids of {expected.source}'s format, {expected.pattern})" if expected
                else ""),
             f"unconsented expire after {recruitment.unconsented_expiry_minutes:g} min",
             f"a code's browser binding frees after {recruitment.binding_idle_minutes:g} min "
             "idle"]
    return "; ".join(parts)


def _ends(recruitment: Any) -> str:
    """Each way out of the study as its end page offers it: the address and the code."""
    from study.protocol.recruitment import OUTCOMES

    def shown(link: Any) -> str:
        parts = [part for part in (link.url, link.code and f"code {link.code}") if part]
        return " + ".join(parts) if parts else "-"
    return "; ".join(f"{name} {shown(recruitment.end(name))}" for name in OUTCOMES)


def _clipped(consequence: str) -> str:
    """What follows a capability clipped at 0.01 or 0.99 (``[study] clipped_capability``)."""
    follows = {"unmatched": "the unmatched page once practice ends, before a team is formed",
               "continue": "the participant continues; the analysis leaves them out "
                           "(clipped-capability)",
               "keep": "the participant continues on the clipped value, flagged; the report "
                       "gives every confirmatory result with and without them"}[consequence]
    return f"a capability at 0.01 or 0.99 is not a measurement: {follows}"


def _analysis(analysis: Any) -> str:
    kept = "kept" if analysis.keep_completed_sessions_of_incomplete else "dropped"
    check = analysis.manipulation_check_item or "-"
    if analysis.manipulation_check_pass:
        check += f" (passes: {' / '.join(analysis.manipulation_check_pass)})"
    return (f"exclude {', '.join(analysis.exclude) or 'nobody'}; completed sessions of "
            f"incomplete participants {kept}; manipulation check {check}")


def _items(questionnaire: Any) -> str:
    kinds: dict[str, int] = {}
    for item in questionnaire.items:
        key = f"{item.scale.points}-point {item.kind}" if item.scale else item.kind
        kinds[key] = kinds.get(key, 0) + 1
    counts = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    return f"{len(questionnaire.items)} ({counts}): {', '.join(i.id for i in questionnaire.items)}"
