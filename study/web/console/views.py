"""The experimenter console at ``/console``: links, a live view, holds, the action log and
the data download.

Mount it with ``init_app(app)`` after ``create_app``: it registers the blueprint and the
``/console`` Socket.IO namespace, records the protocol and pool the server runs under (for
exports), and starts a pusher that sends the live snapshot to logged-in consoles whenever it
changes. Every experimenter action is logged in ``console_actions``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_socketio import SocketIO, disconnect

from study.calibration.pilot import pool_target
from study.exports.tables import build_export, record_server_run, zip_export
from study.storage.health import disk_space
from study.web.console import auth, fairness, holds, live, teams
from study.web.participant import binding
from study.web.participant.pages import TERMINAL
from study.web.participant.rejections import Rejected
from study.web.serving import security

blueprint = Blueprint("console", __name__, url_prefix="/console")
security.limiter.limit(security.CONSOLE_LIMIT)(blueprint)
NAMESPACE = "/console"
MAX_LINKS = 500
PUSH_INTERVAL = 0.5  # seconds between checks for a changed snapshot
# At most this share of a server process's time goes to building the live view: a thousand
# people taking part at once take a tenth of a second to read (docs/study-day.md).
CONSOLE_SHARE = 0.1


def study() -> Any:
    """The running journey (``study.web.participant.journey.Journey``)."""
    return current_app.extensions["study"]


def _now() -> float:
    return study().clock()


def _address() -> str:
    return request.remote_addr or "?"


def _log(action: str, note: str = "", **detail: Any) -> None:
    holds.log_action(study().storage, action, note, _address(), _now(), detail)


# --- logging in ------------------------------------------------------------------------


@blueprint.route("/login", methods=["GET", "POST"])
@security.limiter.limit(security.LOGIN_LIMIT, methods=["POST"],
                        deduct_when=lambda response: response.status_code == 403,
                        error_message="too many failed logins from this address; wait a minute")
def login() -> Any:
    """Failed logins are limited per client address (shared by every server process):
    guessing stays slow, and a lockout of one address never refuses the experimenter at
    another (docs/study-day.md)."""
    if auth.demo_mode():
        return redirect(url_for("console.index"))
    error = None
    if request.method == "POST":
        auth.check_csrf()
        if auth.log_in(request.form.get("password", ""), _address()):
            _log("login")
            target = request.args.get("next", "")
            return redirect(target if target.startswith("/console") else url_for(
                "console.index"))
        _log("login-failed")
        error = "Wrong password."
    return render_template("console/login.html", error=error, csrf=auth.csrf_token(),
                           protocol=study().protocol), 200 if error is None else 403


@blueprint.post("/logout")
@auth.console_required
def logout() -> Any:
    _log("logout")
    auth.log_out()
    return redirect(url_for("console.login"))


# --- the live view ---------------------------------------------------------------------


def connection_counts(app: Flask) -> Counter[str]:
    """Live socket connections per participant code, over every server process."""
    processes = app.extensions.get("processes")
    return processes.connection_counts() if processes is not None else Counter()


def target_ranges(protocol: Any) -> dict[int, tuple[float, float]]:
    """Per cookie type, the range the pool samples its capability from: the target a
    measured capability is held against (as ``study calibrate`` and the report hold it)."""
    return {task_type: pool_target(protocol, task_type)
            for task_type in range(len(protocol.cookies))}


def connected(app: Flask) -> Callable[[str], int]:
    """A participant code's live connections (-1 where this server does not track them)."""
    counts = connection_counts(app)
    tracked = "connections" in app.extensions
    return lambda code: counts[code] if tracked else -1


def current_snapshot(app: Flask) -> dict[str, Any]:
    journey = app.extensions["study"]
    tracked = "connections" in app.extensions
    snapshot = live.snapshot(journey.storage, journey.clock(), connected(app),
                             target_ranges(journey.protocol),
                             journey.protocol.clipped_capability)
    # Messages of connections that never joined: only counted, never stored.
    snapshot["unjoined_messages"] = (app.extensions["connections"].unjoined_count.total()
                                     if tracked else None)
    snapshot["storage"] = storage_status(journey.storage)
    processes = app.extensions.get("processes")
    snapshot["processes"] = processes.alive() if processes is not None else []
    design = journey.protocol.team
    if design is not None:
        snapshot["teams"] = teams.teams_view(journey.storage)
        snapshot["finished_teams"] = teams.finished_teams(journey.storage)
        snapshot["lobby"] = teams.lobby_view(journey.storage, design.shared_seconds)
    snapshot["fairness"] = fairness.by_condition(
        [(row["fairness"], 1) for row in snapshot["participants"]]
        + [(team["fairness"], team["fairness"]["people_playing"])
           for team in snapshot.get("teams", []) if team["fairness"]])
    return snapshot


def storage_status(storage: Any) -> dict[str, Any]:
    """Whether this process can write the database (a full disk: since when, how many
    writes failed) and the free space of its filesystem, low below the documented
    threshold (``study.storage.health.disk_space``)."""
    return {**storage.health.status(), "disk": disk_space(storage.path)}


@blueprint.get("/")
@auth.console_required
def index() -> str:
    return render_template("console/index.html", protocol=study().protocol,
                           demo=auth.demo_mode(), csrf=auth.csrf_token(),
                           snapshot=current_snapshot(current_app),
                           created=_created_links(), ends=TERMINAL)


@blueprint.get("/live.json")
@auth.console_required
def live_json() -> Response:
    return current_app.json.response(current_snapshot(current_app))


@blueprint.get("/finished.json")
@auth.console_required
def finished_json() -> Response:
    """Participants whose study ended, a page at a time, the latest to end first
    (``?before=ID``: after that participant)."""
    before = request.args.get("before", type=int)
    if before is not None:
        before = min(max(before, 0), live.LAST_ID)  # an id SQLite can compare
    return current_app.json.response(live.finished_page(study().storage,
                                                        connected(current_app), before))


# --- links -----------------------------------------------------------------------------


def _link(code: str) -> str:
    return url_for("participant.page", code=code, _external=True)


def _created_links() -> list[str]:
    codes = request.args.get("created", "")
    return [_link(code) for code in codes.split(",") if code][:MAX_LINKS]


@blueprint.post("/links")
@auth.console_required
def create_links() -> Any:
    """Create participant links; each gets the order of conditions that is least held."""
    try:
        count = int(request.form.get("count", "1"))
    except ValueError:
        abort(400, description="count must be a whole number")
    if not 1 <= count <= MAX_LINKS:
        abort(400, description=f"create between 1 and {MAX_LINKS} links at a time")
    participants = [study().enrol(origin="console") for _ in range(count)]
    codes = [p["code"] for p in participants]
    _log("create-links", request.form.get("note", ""), codes=codes)
    return redirect(url_for("console.index", created=",".join(codes)))


@blueprint.post("/links.txt")
@auth.console_required
def links_text() -> Response:
    """The links just created, as a text file (one per line) for `study bot --codes`."""
    codes = [c for c in request.form.get("codes", "").split(",") if c][:MAX_LINKS]
    known = [c for c in codes if study().storage.participant(c) is not None]
    body = "".join(f"{_link(code)}\n" for code in known)
    return Response(body, mimetype="text/plain",
                    headers={"Content-Disposition": "attachment; filename=links.txt"})


# --- holds -----------------------------------------------------------------------------


@blueprint.post("/participants/<code>")
@auth.console_required
def participant_action(code: str) -> Any:
    """Pause, resume, abort, flag, unflag, annotate or withdraw one participant, with a
    note (a withdrawal's note is its reason, and required)."""
    participant = study().storage.participant(code)
    if participant is None:
        abort(404)
    action = request.form.get("action", "")
    if action == "withdraw":
        return _withdraw(code, request.form.get("note", ""))
    if action == "release":
        return _release(participant, request.form.get("note", ""))
    try:
        holds.apply_action(study().storage, participant, action,
                           request.form.get("note", ""), _address(), _now())
    except ValueError as error:
        abort(400, description=str(error))
    if action == "abort":
        _drop_seats([participant], "aborted")
    study().announce(code)  # the page shows the hold, and continues when resumed
    return _done(action, code)


@blueprint.post("/teams/<int:team_id>")
@auth.console_required
def team_action(team_id: int) -> Any:
    """Pause, resume or abort every person of a team at once (each logged, the team
    named in the note); an abort gives their seats to agents."""
    action = request.form.get("action", "")
    if action not in ("pause", "resume", "abort"):
        abort(400, description=f"unknown team action {action!r}")
    try:
        people = teams.hold_team(study().storage, team_id, action,
                                 request.form.get("note", ""), _address(), _now())
    except ValueError as error:
        abort(400, description=str(error))
    if not people:
        abort(404)
    if action == "abort":
        _drop_seats(people, "aborted")
    for person in people:
        study().announce(person["code"])
    return _done(action, f"team {team_id}")


def _drop_seats(people: list[dict[str, Any]], reason: str) -> None:
    """An agent plays each of these people's seats from their team's next round (no-op
    for someone not in a team); their teammates' pages are told."""
    journey = study()
    with journey.storage.event():
        changed: set[int] = set()
        for person in people:
            changed |= journey.teams.drop(person["id"], reason, _now())
    journey.push_states(changed)


def _withdraw(code: str, reason: str) -> Any:
    """Withdraw a participant (their data erased) with the reason, which is required."""
    try:
        study().withdraw_by_console(code, reason, _address())
    except Rejected as rejection:
        abort(400, description=rejection.detail or rejection.reason)
    return _done("withdraw", code)


def _release(participant: dict[str, Any], note: str) -> Any:
    """Free the code from the browser it is bound to, so the participant can go on in
    another one (``study.web.participant.binding``); logged."""
    released = binding.release(study().storage, participant)
    holds.log_action(study().storage, "release", note, _address(), _now(),
                     {"code": participant["code"], "was_bound": released})
    return _done("release", participant["code"])


def _done(action: str, code: str) -> Any:
    if request.accept_mimetypes.best == "application/json":
        return {"ok": True}
    flash(f"{action}: {code}")
    return redirect(url_for("console.index"))


@blueprint.get("/log")
@auth.console_required
def action_log() -> str:
    rows = study().storage.all("SELECT * FROM console_actions ORDER BY id DESC LIMIT 1000")
    return render_template("console/log.html", protocol=study().protocol, rows=rows,
                           demo=auth.demo_mode(), csrf=auth.csrf_token())


# --- data ------------------------------------------------------------------------------


@blueprint.get("/export.zip")
@auth.console_required
def export_zip() -> Response:
    """The same files as ``study export``, as one zip."""
    storage = study().storage
    export = build_export(storage.path)
    _log("export", rows=export.rows)
    name = f"{study().protocol.name}-export-{time.strftime('%Y%m%d-%H%M%S')}.zip"
    return Response(zip_export(export), mimetype="application/zip",
                    headers={"Content-Disposition": f"attachment; filename={name}"})


# --- live pushes -----------------------------------------------------------------------


class Pusher:
    """Sends the snapshot to this process's ``/console`` sockets when it changed (thread);
    a socket whose session has logged out (on any process) is dropped, never pushed to.
    A console in a hidden tab says so (``looking``) and costs nothing until it is looked at
    again: the snapshot is built only while somebody can see it."""

    def __init__(self, app: Flask, socketio: SocketIO, interval: float = PUSH_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.socketio = socketio
        self.interval = interval
        self.clock = clock
        self.viewers: dict[str, str | None] = {}  # sid -> console session id
        self.hidden: set[str] = set()  # viewers whose tab is hidden
        self.last: str | None = None
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, name="console-pusher", daemon=True)

    def watch(self, sid: str, session_id: str | None) -> None:
        with self.lock:
            self.viewers[sid] = session_id
            self.last = None  # a new viewer gets the next snapshot even if unchanged

    def unwatch(self, sid: str) -> None:
        with self.lock:
            self.viewers.pop(sid, None)
            self.hidden.discard(sid)

    def looking(self, sid: str, visible: bool) -> None:
        """A viewer's tab was hidden or shown; shown, it gets the next snapshot."""
        with self.lock:
            if sid not in self.viewers:
                return
            if visible:
                self.hidden.discard(sid)
                self.last = None
            else:
                self.hidden.add(sid)

    def _seen_by(self) -> dict[str, str | None]:
        """The viewers whose tab can be seen, with their console sessions."""
        with self.lock:
            return {sid: session for sid, session in self.viewers.items()
                    if sid not in self.hidden}

    def run(self) -> None:
        pause = self.interval
        while not self.stopped.wait(pause):
            began = self.clock()
            self.push()
            pause = self.pause_after(self.clock() - began)

    def pause_after(self, took: float) -> float:
        """The wait before the next snapshot: the interval, or as long as it takes for
        the snapshots to cost at most ``CONSOLE_SHARE`` of the process, which serves the
        participants too."""
        return max(self.interval, took * (1 - CONSOLE_SHARE) / CONSOLE_SHARE)

    def push(self) -> None:
        viewers = self._seen_by()
        if not viewers:
            return
        ended = auth.ended_sessions(self.app.extensions["study"].storage, viewers.values())
        snapshot = current_snapshot(self.app)
        now = snapshot.pop("now")
        # Encoded once, to see whether it changed and to send: a study of thousands makes
        # megabytes of it. The server's clock goes beside it, changing every time.
        text = json.dumps(snapshot)
        changed, self.last = text != self.last, text
        for sid, session_id in viewers.items():
            if session_id in ended:
                self.unwatch(sid)
                self.socketio.server.disconnect(sid, namespace=NAMESPACE)
            elif changed:
                self.socketio.emit("live", (text, now), to=sid, namespace=NAMESPACE)

    def stop(self) -> None:
        self.stopped.set()


def register_namespace(socketio: SocketIO, pusher: Pusher) -> None:
    """``/console`` admits logged-in experimenters only; participants are disconnected."""

    @socketio.on("connect", namespace=NAMESPACE)
    def on_connect(*_: Any) -> bool:
        if not auth.logged_in():
            return False
        pusher.watch(request.sid, auth.current_session())  # type: ignore[attr-defined]
        return True

    @socketio.on("disconnect", namespace=NAMESPACE)
    def on_disconnect(*_: Any) -> None:
        pusher.unwatch(request.sid)  # type: ignore[attr-defined]

    @socketio.on("looking", namespace=NAMESPACE)
    def on_looking(visible: Any = True) -> None:
        if not auth.logged_in():
            disconnect()
            return
        pusher.looking(request.sid, visible is not False)  # type: ignore[attr-defined]

    @socketio.on("refresh", namespace=NAMESPACE)
    def on_refresh(*_: Any) -> Any:
        if not auth.logged_in():
            disconnect()
            return None
        return current_snapshot(current_app)


def init_app(app: Flask) -> None:
    """Mount the console on a study app and record what the server runs under."""
    journey = app.extensions["study"]
    socketio: SocketIO = app.extensions["socketio"]
    holds.ensure_tables(journey.storage)
    record_server_run(journey.storage, Path(journey.protocol.path), journey.protocol.name,
                      getattr(journey.teammates, "name", None), journey.clock())
    app.register_blueprint(blueprint)
    pusher = Pusher(app, socketio)
    app.extensions["console_pusher"] = pusher
    register_namespace(socketio, pusher)
    pusher.thread.start()
