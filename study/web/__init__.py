"""The Flask application of the browser study: ``create_app(config)``.

Config keys: ``PROTOCOL`` (path, required), ``DATABASE`` (default ``var/<name>.sqlite``),
``TEAMMATES`` (a teammate source; default: the protocol's pool, built on first use under
``POOL_DIR``), ``CLOCK`` (a function returning epoch seconds; tests inject one),
``SCHEDULER`` (start the round scheduler thread and the write-ahead log's checkpointer,
default True),
``ASYNC_MODE`` (Socket.IO's: ``threading`` by default, ``gevent`` under ``study serve``),
``MESSAGE_QUEUE`` (a Redis URL shared by several server processes, default none; it also
holds the participants' message rate limits, ``study.web.participant.admission``),
``DURABILITY`` (``full`` by default, or ``normal``: what an acknowledged event survives,
see ``study.storage.database.DURABILITIES``),
``STUDY_CONSOLE_PASSWORD`` (the experimenter console's; see ``study.web.console.auth``),
``STUDY_TRUST_PROXY`` (trust a proxy's forwarded headers; see ``study.web.serving.security``),
``ENROL_RATE_LIMIT`` (new participants per client address, e.g. ``"600 per minute"``).
``SECRET_KEY`` defaults to ``STUDY_SECRET_KEY`` from the environment (the same on every
process) or a random one.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

from flask_socketio import SocketIO

from study.protocol.loader import load_protocol
from study.storage.database import Storage
from study.web.console import views as console
from study.web.participant import error_pages, sockets
from study.web.participant import links as participant
from study.web.participant.admission import MAX_TRANSPORT_BYTES
from study.web.participant.agent_pool import PoolTeammates
from study.web.participant.inputs import PacketJSON
from study.web.participant.journey import Journey
from study.web.participant.station_pushes import INTERVAL_SECONDS
from study.web.serving import queue, rooms, security, unavailable, websockets
from study.web.serving.app_class import STATIC, TEMPLATES, StudyFlask
from study.web.serving.processes import Processes
from study.web.serving.scheduler import Scheduler


def create_app(config: dict[str, Any]) -> StudyFlask:
    """The app with its journey in ``app.extensions["study"]`` and Socket.IO in
    ``app.extensions["socketio"]``; rounds overdue in the database are closed first."""
    protocol = load_protocol(config["PROTOCOL"])
    app = StudyFlask(__name__, template_folder=str(TEMPLATES), static_folder=str(STATIC))
    app.config.update(SECRET_KEY=os.environ.get("STUDY_SECRET_KEY") or secrets.token_hex(16),
                      SCHEDULER=True)
    app.config.update(config)
    storage = Storage(config.get("DATABASE") or Path("var") / f"{protocol.name}.sqlite",
                      durability=config.get("DURABILITY", "full"))
    teammates = config.get("TEAMMATES") or PoolTeammates.for_protocol(
        protocol, Path(config.get("POOL_DIR", "var/pools")))
    if hasattr(teammates, "prepare"):
        teammates.prepare(protocol.team is not None and protocol.team.on_timeout == "agents")
    # A connection's events are handled in its own reader, one after the other: a tab's
    # messages are applied in the order sent, with no task started per message.
    manager = (queue.manager(config["MESSAGE_QUEUE"]) if config.get("MESSAGE_QUEUE")
               else rooms.LocalManager())
    socketio = SocketIO(app, async_mode=config.get("ASYNC_MODE", "threading"),
                        async_handlers=False, max_http_buffer_size=MAX_TRANSPORT_BYTES,
                        json=PacketJSON, serializer=sockets.TextPacket, client_manager=manager)
    clock = config.get("CLOCK", time.time)
    # With the clock running, a team is formed off the scheduler's thread; without it
    # (tests drive ``tick`` by hand) at once, so what follows a tick is deterministic.
    background = socketio.start_background_task if app.config["SCHEDULER"] else None
    processes = Processes(storage, clock)
    notifier = sockets.Notifier(socketio, processes, bool(config.get("MESSAGE_QUEUE")),
                                config.get("STATION_PUSH_SECONDS", INTERVAL_SECONDS))
    journey = Journey(protocol, storage, teammates, clock, notifier,
                      **({"background": background} if background else {}))
    if config.get("MESSAGE_QUEUE"):  # several processes share the study
        journey.admission.share(config["MESSAGE_QUEUE"], f"study-{protocol.name}:rate")
        queue.show_queue_errors()
        storage.shared_file = True  # its write lock is theirs too
    app.extensions["study"] = journey
    app.extensions["stations"] = notifier.stations
    app.extensions["processes"] = processes
    app.extensions["connections"] = sockets.register(socketio, journey, processes)
    app.register_blueprint(participant.blueprint)
    console.init_app(app)
    security.init_app(app)
    websockets.init_app(app)  # a participant page's socket uncompressed
    unavailable.init_app(app)  # a full disk: 503 and a calm page, not 500
    error_pages.init_app(app)  # 404, 500, 503 in the study's language
    recover(journey, processes)
    if app.config["SCHEDULER"]:
        scheduler = Scheduler(journey, processes)
        # One process checkpoints the shared log: the one that closes the rounds.
        storage.checkpoint_in_background(turn=lambda: scheduler.holding)
        app.extensions["scheduler"] = scheduler
        scheduler.start()
        socketio.start_background_task(notifier.stations.run)
    return app


def recover(journey: Journey, processes: Processes) -> None:
    """At start: if no other process of the study is alive, the study was down since its
    last sign of life; close the rounds whose deadline passed meanwhile."""
    if not processes.others_alive():
        journey.recover(processes.last_sign_of_life())
    processes.forget_dead()
