"""Simulated participants that take part over HTTP and Socket.IO exactly as a browser does:
for pilots, demos, the resilience tests and the load benchmark."""

from study.bots.client import Acked, AckLog, Connection, ServerGone
from study.bots.participant import (
    BEHAVIOURS,
    Behaviour,
    Bot,
    Outcome,
    Profile,
    StudyFacts,
    profile_for,
)
from study.bots.swarm import SwarmResult, bot_codes, run_swarm

__all__ = ["BEHAVIOURS", "AckLog", "Acked", "Behaviour", "Bot", "Connection", "Outcome",
           "Profile", "ServerGone", "StudyFacts", "SwarmResult", "bot_codes", "profile_for",
           "run_swarm"]
