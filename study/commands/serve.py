"""``study serve``: run the browser study of a protocol on this machine.

The first run builds the protocol's team pool (cached under ``var/pools``); the database
defaults to ``var/<protocol>.sqlite`` so a restart continues the same study.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from study.protocol import load_protocol
from study.web import create_app
from study.web.teammate import PoolTeammates

DEFAULT_PROTOCOL = Path("protocols/study1.toml")


def console_password_set() -> bool:
    return bool(os.environ.get("STUDY_CONSOLE_PASSWORD"))


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "serve", help="serve the browser study of a protocol",
        description="Serve the participant pages and the experimenter console of a protocol. "
                    "Builds the protocol's team pool on first use and prints the links.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("protocol", nargs="?", type=Path, default=DEFAULT_PROTOCOL,
                        help="the study's protocol file")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=5000, help="port to listen on")
    parser.add_argument("--db", type=Path, default=None,
                        help="SQLite database (default: var/<protocol name>.sqlite)")
    parser.add_argument("--pools", type=Path, default=Path("var/pools"),
                        help="where team pools are built and cached")
    parser.add_argument("--message-queue", default=os.environ.get("STUDY_MESSAGE_QUEUE"),
                        metavar="REDIS_URL",
                        help="Redis URL shared by several server processes on one database "
                             "(or set STUDY_MESSAGE_QUEUE); without it, one process")
    parser.add_argument("--no-scheduler", action="store_true",
                        help="do not close rounds here: another process sharing the "
                             "database and the message queue runs the one scheduler")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    protocol = load_protocol(args.protocol)
    print(f"preparing the team pool of {protocol.name} (built once, then cached in "
          f"{args.pools}) ...", flush=True)
    teammates = PoolTeammates.for_protocol(protocol, args.pools)
    database = args.db or Path("var") / f"{protocol.name}.sqlite"
    app = create_app({"PROTOCOL": args.protocol, "DATABASE": database, "TEAMMATES": teammates,
                      "MESSAGE_QUEUE": args.message_queue,
                      "SCHEDULER": not args.no_scheduler})
    host = "localhost" if args.host in ("0.0.0.0", "127.0.0.1") else args.host
    base = f"http://{host}:{args.port}"
    print(f"study {protocol.name}: database {database}, pool {teammates.name}")
    print(f"  participant link (new participant): {base}/start")
    print(f"  participant link (with a code):     {base}/p/<code>")
    print(f"  experimenter console:               {base}/console"
          + ("" if console_password_set() else "  (DEMO MODE: no STUDY_CONSOLE_PASSWORD)"),
          flush=True)
    app.extensions["socketio"].run(app, host=args.host, port=args.port,
                                   allow_unsafe_werkzeug=True)
    return 0
