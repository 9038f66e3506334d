"""Serving a study for real: gunicorn with one gevent worker per process, and for several
processes HAProxy in front and Redis between them, as Flask-SocketIO's deployment guide
describes (one worker per gunicorn, a balancer with sticky sessions, a message queue).

Nothing here balances, queues or encrypts by itself: gunicorn's master restarts its
worker, HAProxy routes (cookie stickiness for Socket.IO's long-polling, health checks to
route around a dead process) and terminates HTTPS (``Tls``), Redis carries the pushes between
processes. This module writes their configuration, starts them, starts a balancer or queue
that died again (``Restarts``), and stops them together.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import resource
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from study.allocation.model import InvalidInput
from study.protocol.loader import load_protocol
from study.web.serving import queue
from study.web.serving.collector import ShortCollections
from study.web.serving.unavailable import balancer_error_files
from study.web.serving.websockets import ROUTE_PARAMETER

# Connections one gevent worker accepts (gunicorn's default is 1,000).
WORKER_CONNECTIONS = 10_000
WORKER_BACKLOG = 2048  # gunicorn's default
# The longest request line a worker reads: gunicorn's largest bound (its 0 reads lines of
# any length), twice its default, so every link the study makes fits with room to spare.
REQUEST_LINE_BYTES = 8190
# Loopback ports of the workers and Redis when none are given: the first free ones of this
# range, below Linux's ephemeral ports (32768-60999) that outgoing connections take.
PORT_RANGE = range(20000, 21000)
# A line of a child's output that names why it failed: a Python exception, HAProxy's alert,
# a port taken by another program.
CAUSE = re.compile(r"^[\w.]*(Error|Exception)\b|\[ALERT\]|Address already in use")
# How long a browser that saw the study over HTTPS refuses plain HTTP to it: a year, for
# this host only (``includeSubDomains`` would bind an institution's other sites too).
HSTS = "max-age=31536000"
# A balancer or queue that dies is started again, at most this many times within this many
# seconds: one that keeps dying has a cause a restart does not remove (its port taken, its
# binary gone), and the study then stops saying how to resume it.
RESTARTS = 3
RESTART_WINDOW_SECONDS = 600.0


class StartFailed(InvalidInput):
    """A process of the study that could not start, with the cause it gave."""

    def __init__(self, what: str, cause: str) -> None:
        self.field, self.value = what, None
        ValueError.__init__(self, f"{what}: {cause}")


class Child(subprocess.Popen):
    """A process of the study whose error output is passed on (``forward``) and its last
    lines kept, so a failure can name its cause."""

    def __init__(self, name: str, args: list[str], *, forward: bool = True,
                 **popen: Any) -> None:
        popen.setdefault("stderr", subprocess.PIPE)
        super().__init__(args, text=True, errors="replace", **popen)
        self.name = name
        self.lines: deque[str] = deque(maxlen=200)
        stream = self.stderr if self.stderr is not None else self.stdout
        self.reader = threading.Thread(target=self._read, args=(stream, forward),
                                       daemon=True, name=f"output of {name}")
        self.reader.start()

    def _read(self, stream: Any, forward: bool) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))
            if forward:
                sys.stderr.write(line)
                sys.stderr.flush()

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def cause(self) -> str:
        """The last line naming an error, else the last line it wrote."""
        lines = [line.strip() for line in list(self.lines) if line.strip()]
        named = [line for line in lines if CAUSE.search(line)]
        return (named or lines or ["(no output)"])[-1]

    def failed(self, doing: str) -> StartFailed:
        """The error to stop with once this process has exited while ``doing``."""
        self.wait(timeout=10)
        self.reader.join(timeout=10)  # until it has read the last lines
        return StartFailed(f"{self.name} (pid {self.pid})",
                           f"exited with {self.returncode} {doing}: {self.cause()}")


@dataclass
class Restarts:
    """When each helper (HAProxy, Redis) was started again: at most ``RESTARTS`` within
    ``RESTART_WINDOW_SECONDS``."""

    times: dict[str, deque[float]] = field(default_factory=dict)

    def allow(self, name: str, now: float) -> int | None:
        """The number of this restart within the window, or None once the bound is spent."""
        recent = self.times.setdefault(name, deque())
        while recent and now - recent[0] > RESTART_WINDOW_SECONDS:
            recent.popleft()
        if len(recent) >= RESTARTS:
            return None
        recent.append(now)
        return len(recent)


def resume_advice() -> str:
    """What to do once the study stopped: every participant's place is in the database."""
    return ("every participant's place is stored in the database: run the same command "
            f"again ({shlex.join(['study', *sys.argv[1:]])}) and everyone resumes where "
            "they were")


@dataclass(frozen=True)
class Tls:
    """HTTPS at HAProxy: the certificate (with its chain) and its key as PEM files, and the
    port whose plain HTTP is redirected to HTTPS."""

    cert: Path
    key: Path
    http_port: int

    def write_pem(self, directory: Path) -> Path:
        """HAProxy's one file (the chain, then the key) in the study's private directory,
        written afresh at every start so a renewed certificate is served after a restart."""
        pem = directory / "tls.pem"
        parts = [path.read_text(encoding="ascii").strip() for path in (self.cert, self.key)]
        pem.touch(mode=0o600)
        pem.write_text("\n".join(parts) + "\n", encoding="ascii")
        return pem


def prepare_database(database: Path, durability: str) -> None:
    """Create the database, its tables and its WAL journal once, before any worker opens it:
    workers opening a fresh file together could race to switch it to WAL ("database is
    locked"), which SQLite's busy timeout does not cover."""
    from study.storage.database import Storage

    Storage(database, durability).close()


def hold_ports(count: int, start: int | None = None) -> list[socket.socket]:
    """Loopback sockets bound for ``count`` workers and handed to them (bind and hold: no
    other program can take a port between its choice and its use): ``start`` onwards when
    given, else the first free ports of ``PORT_RANGE``."""
    candidates = range(start, start + count) if start is not None else PORT_RANGE
    held: list[socket.socket] = []
    for port in candidates:
        try:
            held.append(_bound(port))
        except OSError as error:
            if start is not None or error.errno != errno.EADDRINUSE:
                _close(held)
                raise StartFailed(f"--worker-ports {start}" if start is not None
                                  else "worker port", f"127.0.0.1:{port}: "
                                  f"{error.strerror}") from error
        if len(held) == count:
            return held
    _close(held)
    raise StartFailed("worker ports", f"fewer than {count} free ports in "
                                      f"{PORT_RANGE.start}-{PORT_RANGE.stop - 1}; give "
                                      "--worker-ports START")


def _bound(port: int) -> socket.socket:
    """A TCP socket listening on 127.0.0.1:``port``, which gunicorn then serves. It listens
    at once: sockets that only bind may share a port under ``SO_REUSEADDR`` (which lets a
    restart reuse a port whose old connections linger), listening ones may not."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn's own
        sock.bind(("127.0.0.1", port))
        sock.listen(WORKER_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def bind_public(host: str, port: int, option: str = "--port") -> socket.socket:
    """A socket listening on ``host``:``port``, where participants connect, bound before
    any link is printed (bind and hold): a busy port stops the start with its number, and
    nothing can take it before the server serves it."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as error:
        raise StartFailed(f"--host {host}", str(error.strerror)) from error
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn's own
        sock.bind(address)
        sock.listen(WORKER_BACKLOG)
    except OSError as error:
        sock.close()
        hint = ("another program listens there: stop it or choose another "
                f"{option}") if error.errno == errno.EADDRINUSE else ""
        raise StartFailed(f"{option} {port}", f"{host}:{port}: {error.strerror}"
                          + (f" ({hint})" if hint else "")) from error
    return sock


def check_free(port: int, option: str) -> None:
    """Whether a loopback port a child binds by itself (Redis) is free now, so a busy one
    stops the start before any link is printed."""
    try:
        _bound(port).close()
    except OSError as error:
        raise StartFailed(f"{option} {port}", f"127.0.0.1:{port}: {error.strerror}") from error


def _close(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def ensure_pool_of(protocol: Any, pools: Path) -> Path:
    """Build the protocol's team pool once (cached); the server processes only load it."""
    from study.pool import ensure_pool

    return ensure_pool(protocol.pool_spec(), pools)


def raise_open_file_limit() -> None:
    """Allow as many open sockets as the system lets this user have: a thousand
    participants are a thousand connections through each layer."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def app_factory(protocol: Path, database: Path, pools: Path, message_queue: str | None,
                durability: str = "full") -> Any:
    """The app a gunicorn worker serves, made in the worker (after gevent's patching)."""
    from study.web import create_app

    app = create_app({"PROTOCOL": protocol, "DATABASE": database, "POOL_DIR": pools,
                      "MESSAGE_QUEUE": message_queue, "ASYNC_MODE": "gevent",
                      "DURABILITY": durability})
    socketio = app.extensions["socketio"]
    socketio.start_background_task(ShortCollections().run)
    queue.count_publishes(socketio, app.extensions["study"].storage)
    return app


def study_worker() -> type:
    """gunicorn's gevent worker, which answers a request line longer than gunicorn reads
    (8,190 bytes at most: above that it would read a line of any length) with the study's
    page for a link without a valid participant id instead of gunicorn's bare "414 Request
    Line is too large": a start link whose id is 10 kB is a link a participant may follow."""
    from gunicorn.http.errors import LimitRequestLine
    from gunicorn.workers.ggevent import GeventWorker

    from study.web.participant.error_pages import overlong_link_answer

    class StudyWorker(GeventWorker):
        def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
            if not isinstance(exc, LimitRequestLine):
                super().handle_error(req, client, addr, exc)
                return
            self.log.warning("a request line of more than %d bytes: the page for a link "
                             "without a valid id", self.cfg.limit_request_line)
            try:
                client.sendall(overlong_link_answer(self.wsgi))
            except OSError:
                self.log.debug("the client left before the page for a long link")

    return StudyWorker


def _gunicorn_application(options: dict[str, Any], factory: Any) -> Any:
    from gunicorn.app.base import BaseApplication

    class StudyApplication(BaseApplication):
        """gunicorn's documented way to embed it: options set here, app made per worker."""

        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return factory()

    return StudyApplication()


@dataclass
class Single:
    """One gunicorn process with one gevent worker."""

    protocol: Path
    database: Path
    pools: Path
    host: str
    port: int
    message_queue: str | None = None
    durability: str = "full"
    listen_fd: int | None = None  # a socket bound by ``bind`` or ``Balanced``
    unix_fd: int | None = None  # a Unix socket bound by ``Balanced``: HAProxy's way in

    def bind(self) -> None:
        """Take ``host``:``port`` now (gunicorn serves the socket, and closes it)."""
        if self.listen_fd is None:
            self.listen_fd = bind_public(self.host, self.port).detach()

    def run(self) -> int:
        raise_open_file_limit()
        self.bind()
        bind = [f"fd://{self.listen_fd}" if self.listen_fd is not None else (
            f"{self.host}:{self.port}")]
        if self.unix_fd is not None:
            bind.append(f"fd://{self.unix_fd}")
        options = {"bind": bind, "workers": 1, "limit_request_line": REQUEST_LINE_BYTES,
                   "worker_class": study_worker(), "worker_connections": WORKER_CONNECTIONS,
                   "timeout": 30, "graceful_timeout": 5, "keepalive": 5,
                   "loglevel": "warning", "proc_name": f"study-{self.port}"}
        factory = lambda: app_factory(self.protocol, self.database, self.pools,  # noqa: E731
                                      self.message_queue, self.durability)
        _gunicorn_application(options, factory).run()
        return 0


@dataclass
class Balanced:
    """``workers`` gunicorn processes on one database behind HAProxy, with Redis between
    several of them; started together, stopped together. With ``tls`` HAProxy serves HTTPS
    (one worker too: it then needs no Redis)."""

    protocol: Path
    database: Path
    pools: Path
    host: str
    port: int
    workers: int
    message_queue: str | None = None
    durability: str = "full"
    worker_ports: int | None = None  # the first worker's port; else from PORT_RANGE
    redis_port: int | None = None  # else from PORT_RANGE
    tls: Tls | None = None
    children: list[Child] = field(default_factory=list)
    # Bound by ``bind``: the public port (and the redirect's) by port, the workers' ports.
    # The public sockets stay open here while HAProxy serves them, so one started again
    # gets them (connections meanwhile wait in their backlog).
    public: dict[int, socket.socket] = field(default_factory=dict)
    worker_sockets: list[socket.socket] = field(default_factory=list)
    # How to start each helper again, by its name (``Child.name``).
    starters: dict[str, Callable[[], Child]] = field(default_factory=dict)
    restarts: Restarts = field(default_factory=Restarts)

    def bind(self) -> None:
        """Take every port the study needs now, so a busy one stops the start before any
        link is printed: HAProxy's (it gets the sockets), the workers', and Redis's when
        one is given (Redis binds by itself: checked free)."""
        if self.public:
            return
        try:
            self.public[self.port] = bind_public(self.host, self.port)
            if self.tls:
                self.public[self.tls.http_port] = bind_public(self.host, self.tls.http_port,
                                                              "--http-port")
            self.worker_sockets = hold_ports(self.workers, self.worker_ports)
            if self.redis_port and self.workers > 1 and not self.message_queue:
                check_free(self.redis_port, "--redis-port")
        except StartFailed:
            self._release()
            raise

    def _release(self) -> None:
        _close([*self.public.values(), *self.worker_sockets])
        self.public, self.worker_sockets = {}, []

    def run(self) -> int:
        raise_open_file_limit()
        self.bind()
        directory = Path(tempfile.mkdtemp(prefix="study-serve-"))
        stopping: list[int] = []
        signal.signal(signal.SIGTERM, lambda number, _: stopping.append(number))
        try:
            prepare_database(self.database, self.durability)
            self._start_workers(directory)
            self._start_haproxy(directory)
            say("serving: " + ", ".join(f"{child.name} (pid {child.pid})"
                                        for child in self.children))
            return self._wait(stopping)
        except KeyboardInterrupt:
            return 0
        finally:
            self._release()
            self._stop_all()
            shutil.rmtree(directory, ignore_errors=True)

    def _start_workers(self, directory: Path) -> None:
        """Bind the workers' ports, start Redis (unless given, or one worker) and the
        workers, and wait until every worker answers."""
        sockets, self.worker_sockets = self.worker_sockets, []
        ports = [int(sock.getsockname()[1]) for sock in sockets]
        try:
            queue = self.message_queue or (
                self._start_redis(directory, set(ports)) if self.workers > 1 else None)
            # Workers listen on loopback behind HAProxy (``option forwardfor``): the
            # client's address, which the login limit is kept per, is the forwarded one.
            env = {**os.environ, "STUDY_TRUST_PROXY": "1",
                   "STUDY_SECRET_KEY": os.environ.get("STUDY_SECRET_KEY")
                   or secrets.token_hex(16)}
            for number, sock in enumerate(sockets, 1):
                self._start_worker(number, sock, queue, env, directory)
        finally:
            _close(sockets)  # each worker holds its own copy
        for port, worker in zip(ports, self.children[-len(ports):], strict=True):
            _wait_until_healthy(port, worker)
        return ports

    def _start_redis(self, directory: Path, taken: set[int]) -> str:
        """Redis on ``redis_port``, else on the first port of ``PORT_RANGE`` it can bind
        (another program may take a port first: Redis then says so and the next is tried).
        Started again, it takes the same port: the workers' queue URL names it."""
        ports = [self.redis_port] if self.redis_port else [
            port for port in PORT_RANGE if port not in taken]
        for port in ports:
            redis = _redis(port, directory)
            if _redis_ready(redis):
                self.children.append(redis)
                self.starters[redis.name] = functools.partial(_ready_redis, port, directory)
                return f"redis://127.0.0.1:{port}/0"
            if self.redis_port or not redis.said("Address already in use"):
                raise redis.failed(f"while starting on 127.0.0.1:{port}")
        raise StartFailed("redis-server", f"no free port in {PORT_RANGE.start}-"
                                          f"{PORT_RANGE.stop - 1}; give --redis-port")

    def _start_worker(self, number: int, sock: socket.socket, queue: str | None,
                      env: dict[str, str], directory: Path) -> None:
        """Worker ``number`` on its loopback port and on ``worker_socket`` (HAProxy's way
        in: a Unix socket spares every frame the loopback's TCP)."""
        port = int(sock.getsockname()[1])
        shared = ["--message-queue", queue] if queue else []
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as unix:
            unix.bind(str(worker_socket(directory, number)))
            unix.listen(socket.SOMAXCONN)
            self.children.append(Child(
                f"server process {number} of {self.workers} (127.0.0.1:{port})",
                [sys.executable, "-m", "study.cli", "serve", str(self.protocol), "--quiet",
                 "--host", "127.0.0.1", "--port", str(port), "--listen-fd",
                 str(sock.fileno()), "--unix-fd", str(unix.fileno()), "--db",
                 str(self.database), "--pools", str(self.pools), *shared,
                 "--durability", self.durability],
                env=env, pass_fds=(sock.fileno(), unix.fileno())))

    def _start_haproxy(self, directory: Path) -> None:
        binary = _need("haproxy", "--tls-cert" if self.tls else "--workers")
        pem = self.tls.write_pem(directory) if self.tls else None
        config = directory / "haproxy.cfg"
        fds = {port: sock.fileno() for port, sock in self.public.items()}
        errors = balancer_error_files(load_protocol(self.protocol), directory)
        workers = [worker_socket(directory, number) for number in range(1, self.workers + 1)]
        config.write_text(haproxy_config(self.host, self.port, workers, self.tls, pem, fds,
                                         errors), encoding="utf-8")

        def serving() -> Child:
            haproxy = Child("haproxy", [binary, "-f", str(config), "-db"],
                            pass_fds=tuple(fds.values()))
            with _stopped_if_failing(haproxy):
                _wait_until_serving(self.port, haproxy, self.host, self.tls is not None)
            return haproxy

        self.starters["haproxy"] = serving
        self.children.append(serving())

    def _wait(self, stopping: list[int]) -> int:
        """Until asked to stop. A worker that dies is routed around by HAProxy (gunicorn
        restarts a worker process whose master lives); a balancer or queue that dies is
        started again (``Restarts``). The study stops only when one cannot be, or every
        worker is gone, and then says how to resume it."""
        workers = [c for c in self.children if "study.cli" in c.args]
        reported: set[int] = set()
        while not stopping:
            for child in list(self.children):
                if child.poll() is None or child.pid in reported:
                    continue
                reported.add(child.pid)
                say(f"{child.name} (pid {child.pid}) exited with {child.returncode}: "
                    f"{child.cause()}")
                if child not in workers and not self._start_again(child):
                    return 1
            if all(w.poll() is not None for w in workers):
                say(f"no server process is left; {resume_advice()}")
                return 1
            time.sleep(0.2)
        return 0

    def _start_again(self, dead: Child) -> bool:
        """Start a dead helper again in its place, as often as ``Restarts`` allows; False
        (said, with how to resume) once that is spent."""
        window = f"{RESTART_WINDOW_SECONDS / 60:g} minutes"
        while (number := self.restarts.allow(dead.name, time.monotonic())) is not None:
            say(f"starting {dead.name} again ({number} of at most {RESTARTS} restarts "
                f"within {window})")
            try:
                started = self.starters[dead.name]()
            except StartFailed as error:
                say(f"{dead.name} did not start: {error}")
                continue
            self.children[self.children.index(dead)] = started
            say(f"{dead.name} runs again (pid {started.pid}); the study goes on")
            return True
        say(f"{dead.name} was started again {RESTARTS} times within {window} and is gone "
            f"again: the study stops; {resume_advice()}")
        return False

    def _stop_all(self) -> None:
        for child in reversed(self.children):
            if child.poll() is None:
                child.terminate()
        for child in self.children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


def say(line: str) -> None:
    """A line of ``study serve``'s own in its log (the error stream a service keeps)."""
    print(f"study serve: {line}", file=sys.stderr, flush=True)


def worker_socket(directory: Path, number: int) -> Path:
    """Where worker ``number`` listens for HAProxy, in the study's private directory."""
    return directory / f"worker-{number}.sock"


# A worker's weight, the same for all: how many places it takes on HAProxy's ring of
# hashed routes. At HAProxy's default (1) two workers got 178 and 155 of 333 teams and four
# 112 to 63; at 256, the most HAProxy takes, 168 and 165, and four within the spread of
# chance (``tests/web/serving/test_route_balance.py``). The busiest worker bounds a server.
ROUTE_WEIGHT = 256


def haproxy_config(host: str, port: int, workers: list[Path], tls: Tls | None = None,
                   pem: Path | None = None, fds: dict[int, int] | None = None,
                   error_files: dict[int, Path] | None = None) -> str:
    """HAProxy in front of the workers, reached at their Unix sockets ``workers``: a
    request naming a route (``?route=``, the participant page's Socket.IO connection: its
    team, or its code before it has one) goes to the worker that route hashes to, so
    teammates share a process and their pushes stay in memory; any other request goes to
    new participants in turn, with a cookie that keeps a browser's long-polling requests on
    one worker. Health checks every second route around a dead worker (a busy one, slow
    to answer, is not); consistent hashing moves only the dead worker's routes, and the
    avalanche spreads routes that differ in one character (``team-7``, ``team-8``) over
    the workers. Tunnels (websockets) are kept open for a whole study. Each answer names
    its worker (``X-Study-Worker``), so an operator's ``curl -I`` shows where a route
    goes. With ``tls``, HTTPS from ``pem`` (``tls_frontends``). A port in ``fds`` is served
    from the socket bound for it (``Balanced.bind``). ``error_files`` are HAProxy's own
    answers by status (the study's calm page, ``balancer_error_files``)."""
    frontends = tls_frontends(host, port, tls, pem, fds) if tls and pem else f"""frontend study
    bind {_address(host, port, fds)}
    option forwardfor
    default_backend workers
"""
    secure = " secure" if tls else ""
    servers = "\n".join(
        f"    server w{index} unix@{worker} check inter 1s fall 3 rise 1 "
        f"cookie w{index} weight {ROUTE_WEIGHT}" for index, worker in enumerate(workers, 1))
    errors = "".join(f"    errorfile {status} {path}\n"
                     for status, path in (error_files or {}).items())
    return f"""global
    maxconn {haproxy_max_connections()}

defaults
    mode http
    timeout connect 5s
    timeout client 2h
    timeout server 2h
    timeout tunnel 2h
    timeout http-request 30s
    timeout check 5s
    option redispatch
    retries 3
{errors}
{frontends}
backend workers
    balance url_param {ROUTE_PARAMETER}
    hash-type consistent sdbm avalanche
    cookie STUDY_WORKER insert indirect nocache httponly{secure}
    ignore-persist if {{ urlp({ROUTE_PARAMETER}) -m found }}
    option httpchk GET /healthz
    http-response set-header X-Study-Worker %[srv_name]
{servers}
"""


def _address(host: str, port: int, fds: dict[int, int] | None) -> str:
    """Where HAProxy listens: an inherited socket (``fd@N``), else host and port."""
    return f"fd@{fds[port]}" if fds and port in fds else f"{host}:{port}"


def tls_frontends(host: str, port: int, tls: Tls, pem: Path,
                  fds: dict[int, int] | None = None) -> str:
    """HTTPS (TLS 1.2 or newer, HSTS) and, on ``tls.http_port``, a permanent redirect of
    plain HTTP to the same host and path over HTTPS. The workers learn the scheme from
    ``X-Forwarded-Proto`` (set here, never passed on from a client): their cookies are then
    ``Secure`` and Socket.IO accepts the page's https origin."""
    https_port = "" if port == 443 else f":{port}"
    return f"""frontend study
    bind {_address(host, port, fds)} ssl crt {pem} ssl-min-ver TLSv1.2
    http-request set-header X-Forwarded-Proto https
    http-response set-header Strict-Transport-Security "{HSTS}"
    option forwardfor
    default_backend workers

frontend redirect
    bind {_address(host, tls.http_port, fds)}
    http-request redirect location https://%[req.hdr(host),regsub(:[0-9]+$,)]{https_port}\
%[capture.req.uri] code 301
"""


def haproxy_max_connections() -> int:
    """Connections HAProxy may hold: each takes two descriptors (client and worker side)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = hard if hard != resource.RLIM_INFINITY else 100_000
    return max(256, min(50_000, (limit - 200) // 2))


def _need(program: str, option: str = "--workers") -> str:
    path = shutil.which(program) or shutil.which(program, path="/usr/sbin:/usr/bin")
    if path is None:
        raise InvalidInput(option, program, f"needs Debian's {program} "
                                            f"(apt-get install {program})")
    return path


def _redis(port: int, directory: Path) -> Child:
    """A private Redis on loopback ``port``: no persistence (it carries pushes and rate
    limits, nothing the study keeps)."""
    return Child("redis-server", [
        _need("redis-server"), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
        "--appendonly", "no", "--dir", str(directory)], forward=False,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _ready_redis(port: int, directory: Path) -> Child:
    """Redis started again on its ``port``, once it accepts connections."""
    redis = _redis(port, directory)
    with _stopped_if_failing(redis):
        if not _redis_ready(redis):
            raise redis.failed(f"while starting again on 127.0.0.1:{port}")
    return redis


@contextlib.contextmanager
def _stopped_if_failing(child: Child) -> Iterator[None]:
    """A child that did not come up is not left running."""
    try:
        yield
    except StartFailed:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        raise


def _redis_ready(redis: Child, timeout: float = 30.0) -> bool:
    """Whether Redis came up (it says so), False once it exited."""
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if redis.said("Ready to accept connections"):
            return True
        if redis.poll() is not None:
            redis.reader.join(timeout=10)  # its last lines, which say why (a port taken)
            return False
        time.sleep(0.05)
    raise StartFailed(f"redis-server (pid {redis.pid})", f"not ready within {timeout} s")


def _wait_until_healthy(port: int, process: Child, timeout: float = 120.0) -> None:
    """Until the worker's app answers ``/healthz`` (gunicorn listens before its worker has
    loaded the pool): the balancer then starts with every worker in service."""
    import urllib.error
    import urllib.request

    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if process.poll() is not None:
            raise process.failed("while starting")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise StartFailed(f"{process.name} (pid {process.pid})",
                      f"not healthy within {timeout} s")


def _wait_until_serving(port: int, process: Child, host: str, tls: bool,
                        timeout: float = 30.0) -> None:
    """Until HAProxy answers an HTTP request on its port: the socket listened before
    HAProxy started (``Balanced.bind``), so a connection alone proves nothing."""
    import http.client
    import ssl

    target = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    unverified = ssl.create_default_context()  # our own certificate, asked on this machine
    unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if process.poll() is not None:
            raise process.failed(f"while starting on {host}:{port}")
        connection = (http.client.HTTPSConnection(target, port, timeout=5, context=unverified)
                      if tls else http.client.HTTPConnection(target, port, timeout=5))
        try:
            connection.request("GET", "/healthz")
            connection.getresponse().read()
            return
        except (OSError, http.client.HTTPException):
            time.sleep(0.05)
        finally:
            connection.close()
    raise StartFailed(f"{process.name} (pid {process.pid})",
                      f"did not answer on {host}:{port} within {timeout} s")
