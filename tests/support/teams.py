"""Protocols of real teams for the tests: the demo study with a ``[team]``."""

from __future__ import annotations

import json
from pathlib import Path

from study.bots.servers import ServeProcess, quick_protocol
from support.web import DEMO

TEAM = """
[team]
seats = {seats}
formation = "{formation}"
{team_types}
grace_seconds = {grace}
break_seconds = 3
start_seconds = 60

[team.lobby]
{timers}
on_timeout = "{on_timeout}"
leave_after_seconds = 40

[pages.lobby]
title = "The waiting room"
text = "Your teammates finish their practice."

[pages.team]
title = "Your team is ready"
text = "You decorate together with the people in your team."

[pages.team_with_agents]
title = "Your team is ready: people and an agent"
text = "You decorate together with another person and a computer agent."

[pages.team_only_agents]
title = "Your team is ready: you and agents"
text = "You decorate together with computer agents only."
"""


def team_protocol(directory: Path, seats: int = 2, formation: str = "arrival",
                  timers: str = "shared_seconds = 300\nindividual_seconds = 600",
                  on_timeout: str = "agents", grace: float = 5, agents: int = 0) -> Path:
    """The demo study with a ``[team]`` of ``seats`` seats, the last ``agents`` of them
    agents' and the others people's."""
    team_types = 'team_types = ["mixed"]' if formation == "traits" else ""
    text = DEMO.read_text(encoding="utf-8").replace('name = "demo"', 'name = "demo-team"')
    kinds = ["person"] * (seats - agents) + ["agent"] * agents
    if seats == 3:
        text = text.replace("kits = [2, 2]", "kits = [3, 3]").replace(
            "humans = 2", "humans = 3").replace(
            'algorithms = ["efficient", "fair"]', 'algorithms = ["efficient"]').replace(
            "fair_gap_above = 0.60\n", "").split("[pool.teammate]")[0]
    path = directory / f"team{seats}-{agents}-{formation}-{on_timeout}.toml"
    path.write_text(text + TEAM.format(
        seats=json.dumps(kinds), formation=formation, team_types=team_types,
        timers=timers, on_timeout=on_timeout, grace=grace), encoding="utf-8")
    return path


def team_study_on_two_workers(directory: Path, seats: int) -> tuple[Path, Path, ServeProcess]:
    """A quick team study of ``seats`` people (3 s rounds) for ``study serve --workers 2``:
    its protocol, its database and the server, not yet started."""
    protocol = quick_protocol(
        team_protocol(directory, seats=seats, timers="shared_seconds = 15", grace=60),
        directory / "quick.toml", round_seconds=3.0, practice_seconds=2.0)
    db = directory / "study.sqlite"
    server = ServeProcess(protocol, db, directory / "pools", directory / "serve.log",
                          extra=("--workers", "2"))
    return protocol, db, server
