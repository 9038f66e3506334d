"""``study serve``: run the browser study of a protocol on this machine.

The first run builds the protocol's team pool (cached under ``var/pools``); the database
defaults to ``var/<protocol>.sqlite`` so a restart continues the same study. One process is
gunicorn with a gevent worker (the stack Flask-SocketIO documents for production);
``--workers N`` runs N of them on one database behind HAProxy, with Redis as the Socket.IO
message queue (``study.web.serving.deploy``). ``--tls-cert`` and ``--tls-key`` put HAProxy in front
of any number of them to serve HTTPS (docs/deploy.md).

Every port is taken before anything is printed, so a busy one stops the start with its
number and no link. Without ``STUDY_CONSOLE_PASSWORD`` the console is served only on a
loopback address and over plain HTTP, unless ``--open-console`` asks otherwise.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any

DEFAULT_PROTOCOL = Path("protocols/study1.toml")
# The shortest console password served: the console shows every participant and downloads
# every answer, and its login limit (5 failures a minute per address) slows one address,
# not many; twelve characters is the length a dictionary word or a name does not reach.
MIN_CONSOLE_PASSWORD = 12
# ``study.web.serving.deploy.PORT_RANGE``, spelled out for the help (importing the web app to word
# the help would slow every command; a test keeps the two equal).
PORT_RANGE_TEXT = "20000-20999"


def console_password_set() -> bool:
    return bool(os.environ.get("STUDY_CONSOLE_PASSWORD"))


def is_loopback(host: str) -> bool:
    """Whether only programs on this machine can reach ``host``: 127.0.0.0/8, ::1 or
    localhost. Anything else (0.0.0.0, a LAN address, a host name) may be reachable."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposed_console(args: argparse.Namespace) -> tuple[str, str] | None:
    """The option that would put a console without a password where others can reach it,
    and its value: a non-loopback ``--host``, or ``--tls-cert`` (HTTPS is for a reachable
    server); None with a password, or on loopback only."""
    if console_password_set():
        return None
    if not is_loopback(args.host):
        return "--host", args.host
    if args.tls_cert is not None:
        return "--tls-cert", str(args.tls_cert)
    return None


def check_console_guard(args: argparse.Namespace) -> None:
    """Refuse to serve the console without a password where others can reach it (it shows
    every participant and lets anyone download every answer), unless ``--open-console``
    asks for it: a demo on a trusted network."""
    from study.allocation.terms import InvalidInput

    exposed = exposed_console(args)
    if exposed is not None and not args.open_console:
        raise InvalidInput(*exposed, "without STUDY_CONSOLE_PASSWORD the experimenter console "
                           "and every answer (/console/export.zip) would be open to anyone "
                           "who reaches the server. Set a password first, e.g. export "
                           "STUDY_CONSOLE_PASSWORD='something long' (docs/deploy.md), or, "
                           "for a demo on a trusted network only, add --open-console")


def check_console_password() -> None:
    """Refuse a console password too short to keep the console's data safe (its length is
    said, never the password)."""
    from study.allocation.terms import InvalidInput

    password = os.environ.get("STUDY_CONSOLE_PASSWORD", "")
    if 0 < len(password) < MIN_CONSOLE_PASSWORD:
        raise InvalidInput("STUDY_CONSOLE_PASSWORD", f"{len(password)} characters",
                           f"the console password needs at least {MIN_CONSOLE_PASSWORD} "
                           "characters: the console shows every participant and lets "
                           "whoever logs in download every answer. Choose a longer one, "
                           "e.g. export STUDY_CONSOLE_PASSWORD=\"$(openssl rand -base64 24)\" "
                           "(docs/deploy.md)")


def warn_open_console(args: argparse.Namespace) -> None:
    """Say loudly, on the error stream (what a service's log keeps), that the console is
    open to whoever reaches the server."""
    exposed = exposed_console(args)
    if exposed is None or not args.open_console:
        return
    bar = "!" * 78
    print(f"{bar}\n!! OPEN CONSOLE (--open-console): no STUDY_CONSOLE_PASSWORD, served with "
          f"{' '.join(exposed)}.\n!! Anyone who reaches this server can watch every "
          "participant and download every\n!! answer at /console. Only for a demo on a "
          f"trusted network.\n{bar}", file=sys.stderr, flush=True)


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "serve", help="serve the browser study of a protocol",
        description="Serve the participant pages and the experimenter console of a protocol "
                    "on gunicorn with gevent. Builds the protocol's team pool on first use and "
                    "prints the links. With --workers N, N server processes share the "
                    "database and a Redis message queue behind one HAProxy address.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("protocol", nargs="?", type=Path, default=DEFAULT_PROTOCOL,
                        help="the study's protocol file")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=5000, help="port to listen on")
    parser.add_argument("--db", type=Path, default=None,
                        help="SQLite database (default: var/<protocol name>.sqlite)")
    parser.add_argument("--pools", type=Path, default=Path("var/pools"),
                        help="where team pools are built and cached")
    parser.add_argument("--workers", type=_positive, default=1,
                        help="server processes behind one address (more than 1 needs Debian's "
                             "haproxy, and redis-server unless --message-queue is given)")
    parser.add_argument("--message-queue", default=os.environ.get("STUDY_MESSAGE_QUEUE"),
                        metavar="REDIS_URL",
                        help="Redis URL shared by several server processes on one database "
                             "(or set STUDY_MESSAGE_QUEUE); with --workers N and none given, "
                             "a redis-server is started for the study")
    parser.add_argument("--worker-ports", type=_port, default=None, metavar="START",
                        help="with --workers N (or --tls-cert): the workers listen on "
                             "127.0.0.1 ports START to START+N-1; None: the first free ports "
                             f"of {PORT_RANGE_TEXT}")
    parser.add_argument("--redis-port", type=_port, default=None, metavar="PORT",
                        help="with --workers N: the port of the redis-server started for "
                             f"the study; None: the first free port of {PORT_RANGE_TEXT}")
    parser.add_argument("--tls-cert", type=Path, default=None, metavar="FILE",
                        help="serve HTTPS on --port with this certificate (PEM, with its "
                             "chain, e.g. certbot's fullchain.pem): HAProxy terminates TLS "
                             "in front of the server processes (needs Debian's haproxy)")
    parser.add_argument("--tls-key", type=Path, default=None, metavar="FILE",
                        help="with --tls-cert: the certificate's private key (PEM)")
    parser.add_argument("--http-port", type=_port, default=None, metavar="PORT",
                        help="with --tls-cert: plain HTTP on this port is redirected to "
                             "HTTPS; None: 80")
    parser.add_argument("--listen-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--unix-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--durability", choices=("full", "normal"), default="full",
                        help="what an acknowledged message survives: 'full', a power cut "
                             "(each commit waits for the disk); 'normal', a crash of the "
                             "server but not of the machine, for large online studies "
                             "(commits wait for the operating system only; docs/study-day.md)")
    parser.add_argument("--backup-every", type=_minutes, default=None, metavar="MINUTES",
                        help="back up the database every MINUTES while serving (SQLite's "
                             "online backup API, in a process of its own; `study backup`)")
    parser.add_argument("--backup-dir", type=Path, default=Path("var/backups"),
                        help="with --backup-every: where the copies go")
    parser.add_argument("--backup-keep", type=_positive_count, default=48,
                        help="with --backup-every: how many copies are kept")
    parser.add_argument("--open-console", action="store_true",
                        help="allow a non-loopback --host or --tls-cert without "
                             "STUDY_CONSOLE_PASSWORD: the console and every answer are then "
                             "open to anyone who reaches the server (a demo on a trusted "
                             "network only; said loudly at start)")
    parser.add_argument("--quiet", action="store_true",
                        help="print no links (a worker behind a balancer)")
    parser.set_defaults(handler=run)


def _positive(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError("workers must be 1 to 64")
    return value


def _minutes(text: str) -> float:
    value = float(text)
    if not 0 < value <= 7 * 24 * 60:
        raise argparse.ArgumentTypeError("minutes are more than 0 and at most a week")
    return value


def _positive_count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("keep at least 1")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError("a port is 1 to 65535")
    return value


def check_ports(args: argparse.Namespace) -> None:
    """Worker and Redis ports only where they are used, and within the port numbers."""
    from study.allocation.terms import InvalidInput

    if args.workers == 1 and (args.redis_port or (args.worker_ports and not args.tls_cert)):
        raise InvalidInput("--worker-ports/--redis-port", args.worker_ports or args.redis_port,
                           "only with --workers N (one process listens on --port)")
    if args.redis_port and args.message_queue:
        raise InvalidInput("--redis-port", args.redis_port,
                           "a Redis is started only without --message-queue")
    if args.worker_ports and args.worker_ports + args.workers - 1 > 65535:
        raise InvalidInput("--worker-ports", args.worker_ports,
                           f"{args.workers} ports from it pass 65535")


def tls_of(args: argparse.Namespace) -> Any:
    """The HTTPS asked for (``study.web.serving.deploy.Tls``), None without ``--tls-cert``; files
    that cannot be read are refused by name before anything starts."""
    from study.allocation.terms import InvalidInput

    if args.tls_cert is None and args.tls_key is None:
        if args.http_port is not None:
            raise InvalidInput("--http-port", args.http_port, "only with --tls-cert")
        return None
    if args.tls_cert is None or args.tls_key is None:
        raise InvalidInput("--tls-cert/--tls-key", str(args.tls_cert or args.tls_key),
                           "give both the certificate and its key")
    for option, path in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key)):
        try:
            path.read_bytes()
        except OSError as error:
            raise InvalidInput(option, str(path), error.strerror or str(error)) from error
    http_port = 80 if args.http_port is None else args.http_port
    if http_port == args.port:
        raise InvalidInput("--http-port", http_port, "differs from --port (HTTPS)")
    from study.web.serving.deploy import Tls

    return Tls(args.tls_cert.resolve(), args.tls_key.resolve(), http_port)


def run(args: argparse.Namespace) -> int:
    check_ports(args)
    tls = tls_of(args)
    check_console_password()
    check_console_guard(args)
    if args.workers == 1 and tls is None:
        # gunicorn's gevent worker patches the standard library when it starts; patching
        # here, before anything imports ssl or threading, makes that patch complete.
        from gevent import monkey

        monkey.patch_all()
    from study.commands.check import refuse_stale_bounds
    from study.protocol.loader import load_protocol
    from study.web.serving.deploy import Balanced, Single, ensure_pool_of

    protocol = load_protocol(args.protocol)
    refuse_stale_bounds(protocol)  # FEA bounds of another pool: refused, as `study check` does
    database = args.db or Path("var") / f"{protocol.name}.sqlite"
    if args.workers == 1 and tls is None:
        server = Single(args.protocol, database, args.pools, args.host, args.port,
                        args.message_queue, args.durability, args.listen_fd,
                        args.unix_fd)
    else:
        server = Balanced(args.protocol, database, args.pools, args.host, args.port,
                          args.workers, args.message_queue, args.durability,
                          args.worker_ports, args.redis_port, tls)
    server.bind()  # a busy port stops here, before the pool is built or a link printed
    warn_open_console(args)
    if not args.quiet:
        print(f"preparing the team pool of {protocol.name} (built once, then cached in "
              f"{args.pools}) ...", flush=True)
    pool = ensure_pool_of(protocol, args.pools)
    if not args.quiet:
        _print_links(protocol, database, pool, args, tls)
    backups = _start_backups(args, database)
    try:
        return server.run()
    finally:
        if backups is not None:
            backups.terminate()


def _start_backups(args: argparse.Namespace, database: Path) -> Any:
    """``study backup --every`` as a child that stops with this process (never inside a
    process that serves participants)."""
    if args.backup_every is None:
        return None
    import subprocess
    import sys

    if not args.quiet:
        print(f"  backups: every {args.backup_every:g} min into {args.backup_dir}, the "
              f"newest {args.backup_keep} kept", flush=True)
    return subprocess.Popen([sys.executable, "-m", "study.cli", "backup", str(database),
                             "--every", str(args.backup_every), "--dir", str(args.backup_dir),
                             "--keep", str(args.backup_keep), "--parent", str(os.getpid())])


def _print_links(protocol: Any, database: Path, pool: Path, args: argparse.Namespace,
                 tls: Any) -> None:
    shown = "localhost" if args.host in ("0.0.0.0", "127.0.0.1") else args.host
    base = (f"http://{shown}:{args.port}" if tls is None
            else f"https://{shown}" + ("" if args.port == 443 else f":{args.port}"))
    processes = ("1 process" if args.workers == 1 and tls is None else
                 f"{args.workers} process{'es' if args.workers > 1 else ''} behind HAProxy")
    recruitment = protocol.recruitment
    survives = ("a power cut" if args.durability == "full"
                else "a server crash, not a power cut")
    print(f"study {protocol.name}: database {database}, pool {pool.name}, {processes}; "
          f"acknowledged messages survive {survives}")
    if protocol.agent_teammate == "concealed":  # refused beside a [team] (study check)
        print("  the agent teammate is presented as a person until the debrief "
              "(agent_teammate = \"concealed\"): run it as your ethics board approved")
    if tls is not None:
        print(f"  HTTPS with {tls.cert} (TLS 1.2 or newer, HSTS); plain HTTP on port "
              f"{tls.http_port} is redirected to it")
    if recruitment.id_parameter:
        print(f"  recruitment link: {base}/start?{recruitment.id_parameter}=<their id>")
    if recruitment.open_enrolment:
        print(f"  participant link (new participant): {base}/start")
    else:
        print("  participant links: create them in the console (open enrolment is off)")
    print(f"  participant link (with a code):     {base}/p/<code>")
    print(f"  experimenter console:               {base}/console"
          + ("" if console_password_set() else "  (DEMO MODE: no STUDY_CONSOLE_PASSWORD)"),
          flush=True)
