"""The participant's journey: steps, rounds and cookies, checked and stored event by event.

This is the server's authority over the study, independent of Flask and Socket.IO so it can
be driven by the socket handlers, the round scheduler and tests alike. A participant is a
code; every call reads the participant's place from SQLite, checks the message against it,
and commits its effect in one transaction, or refuses it (logged, nothing changed). The
clock is injected: deadlines are tested by calling ``tick(now)``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import secrets
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from study.protocol.loader import Protocol
from study.protocol.recruitment import is_valid_id
from study.storage.database import Storage, to_json
from study.storage.health import RETRY_AFTER_SECONDS, StorageUnavailable
from study.web.participant import binding
from study.web.participant.admission import Admission
from study.web.participant.agent_pool import Policies, TeammateSource, algorithm_for
from study.web.participant.agent_team import AgentTeam
from study.web.participant.outbox import Notify, Outbox, Unheard
from study.web.participant.pages import TERMINAL
from study.web.participant.playing import Rounds, TeammateTimes
from study.web.participant.probes import Probes
from study.web.participant.real_teams import RealTeams
from study.web.participant.records import Records
from study.web.participant.rejections import Rejected
from study.web.participant.state import PageState
from study.web.participant.steps import Steps, declined_mark
from study.web.serving.processes import Processes
from study.web.serving.shares import EVERYONE, Share

MSG_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
CODE = re.compile(r"^[A-Za-z0-9_-]{3,64}$")
EXTERNAL_ID_LIMIT = 512
EXPIRY_CHECK_SECONDS = 60.0
# What the page shows while the database cannot be written (a full disk): its messages wait.
STORAGE_WAIT = ("One moment, please: the bakery is catching up. Please keep this page open; "
                "it goes on by itself.")
log = logging.getLogger(__name__)


UNHEARD = Unheard()


def _at_once(work: Callable[[], None]) -> None:
    """Default for work the server runs off the clock: do it now (tools, tests)."""
    work()


def _unless_unavailable(work: Callable[[], None]) -> Callable[[], None]:
    """Work off the clock that a full disk defers: the storage logs the condition, and the
    scheduler forms the teams left waiting once the disk takes writes again."""
    def run() -> None:
        with contextlib.suppress(StorageUnavailable):
            work()
    return run


def unavailable() -> dict[str, Any]:
    """The answer to a message the database could not take (a full disk): no refusal,
    nothing changed; the page keeps it and sends it again after ``retry_after`` seconds."""
    return {"ok": False, "error": "unavailable", "reason": "storage-unavailable",
            "detail": STORAGE_WAIT, "retry_after": RETRY_AFTER_SECONDS}


class Journey:
    """One study run: its protocol, database, teammate source and clock.

    The journey checks and stores each message and hands its effect to the part that owns
    it: the page steps (``steps.Steps``), the rounds and their clock (``playing.Rounds``),
    the team formed after practice (``agent_team.AgentTeam``; real teams in
    ``real_teams.RealTeams``), and what the page shows (``state.PageState``). The parts
    share no attributes: each is given the others it calls, and pushes go through one
    ``outbox.Outbox``.
    """

    def __init__(self, protocol: Protocol, storage: Storage, teammates: TeammateSource,
                 clock: Callable[[], float], notify: Notify = UNHEARD,
                 background: Callable[[Callable[[], None]], Any] = _at_once) -> None:
        for condition in protocol.conditions:
            algorithm_for(condition, teammates.fea_bounds)  # fail at start, not mid-study
        self.protocol = protocol
        self.storage = storage
        self.teammates = teammates
        self.clock = clock
        self.admission = Admission(storage, clock)
        self.expired_at = -EXPIRY_CHECK_SECONDS
        records = Records(storage)
        self.teams = RealTeams(protocol, storage, teammates, records.advance, records.session)
        teammate_times = TeammateTimes(protocol, storage)
        self.probes = Probes(protocol, storage)
        self.page = PageState(protocol, storage, clock, records, self.teams, teammate_times,
                              self.probes)
        self.outbox = Outbox(storage, self.teams, self.page.state, notify)
        policies = Policies(protocol)
        self.agent_team = AgentTeam(protocol, storage, clock, teammates, records, self.teams,
                                    policies, self.outbox,
                                    lambda work: background(_unless_unavailable(work)))
        self.rounds = Rounds(protocol, storage, clock, records, self.teams, policies,
                             teammate_times, self.agent_team, self.outbox, self.probes)
        self.steps = Steps(protocol, storage, clock, records, self.teams, self.outbox)

    # --- enrolment and joining ----------------------------------------------------------

    def enrol(self, code: str | None = None, external_ids: dict[str, str] | None = None,
              origin: str = "console") -> dict[str, Any]:
        """The participant with this code (or, without a code, with the recruitment id of
        the protocol's ``id_parameter``), created if new; recruitment ids are recorded.
        The reply's ``created`` says whether the participant is new.

        The condition order is assigned at consent, not here (``Steps``): someone who
        never consents holds nothing, so page loads cannot steer the counterbalancing.
        Unconsented participants who came by an open link or a recruitment id expire
        (``expire_unconsented``). One write transaction, so two processes enrolling the
        same recruitment id at once make one participant."""
        if code is not None and not CODE.match(code):
            raise Rejected("bad-code", "codes are 3-64 letters, digits, '-' or '_'")
        recruitment_id = self._recruitment_id(external_ids or {})
        ids = {k[:64]: str(v)[:EXTERNAL_ID_LIMIT] for k, v in (external_ids or {}).items()}
        self.expire_unconsented()
        with self.storage.event() as db:
            existing = self._find(code, recruitment_id)
            if existing is not None:
                self._add_external_ids(existing, ids, recruitment_id)
                return {**self.storage.participant(existing["code"]), "created": False}  # type: ignore[dict-item]
            code = code or self._new_code()
            now = self.clock()
            pid = db["participants"].insert({
                "code": code, "protocol": self.protocol.name, "created_at": now,
                "step": "consent", "external_ids": to_json(ids) if ids else None,
                "recruitment_id": recruitment_id,
                "origin": "recruitment" if recruitment_id and origin == "open" else origin,
            }).last_pk
            db["steps"].insert({"participant_id": pid, "step": "consent", "at": now})
        return {**self.storage.participant(code), "created": True}  # type: ignore[dict-item]

    def _recruitment_id(self, ids: dict[str, str]) -> str | None:
        """The link's recruitment id, as the link carried it (nothing cut off), if it has
        the platform's format; any other id is refused before anything is stored: it
        would reach the bulk bonus file (``study.protocol.recruitment``)."""
        recruitment = self.protocol.recruitment
        parameter, expected = recruitment.id_parameter, recruitment.id_format
        if parameter is None or expected is None:
            return None
        value = str(ids.get(parameter, "")).strip()
        if not value:
            return None
        if not is_valid_id(value, expected):
            raise Rejected("bad-recruitment-id", f"{parameter} is not an id of "
                                                 f"{expected.source}'s format")
        return value

    def _find(self, code: str | None, recruitment_id: str | None) -> dict[str, Any] | None:
        """The participant of the code, else of the recruitment id (when no code is given),
        one who declined included (their id is kept as its hash); a code given but unknown
        is a new participant, whose recruitment id is set only if no other participant has
        it."""
        if code is not None:
            return self.storage.participant(code)
        if recruitment_id is None:
            return None
        return self.storage.one("SELECT * FROM participants WHERE recruitment_id IN (?, ?)",
                                (recruitment_id, declined_mark(recruitment_id)))

    def expire_unconsented(self, force: bool = False) -> int:
        """Delete participants who came by an open link or a recruitment id and have not
        consented within ``unconsented_expiry_minutes`` (they hold no condition order and
        no data; links the experimenter created never expire, nor does a participant whose
        page is open on a live connection). At most once a minute per
        process unless ``force``; returns how many expired."""
        if not force and time.monotonic() - self.expired_at < EXPIRY_CHECK_SECONDS:
            return 0
        self.expired_at = time.monotonic()
        cutoff = self.clock() - self.protocol.recruitment.unconsented_expiry_minutes * 60.0
        with self.storage.event():
            rows = self.storage.all(
                "SELECT id FROM participants WHERE step = 'consent' AND consent IS NULL AND "
                "created_at < ? AND origin IN ('open', 'recruitment') AND code NOT IN "
                "(SELECT code FROM connections)", (cutoff,))
            self.storage.delete_participants([row["id"] for row in rows])
        return len(rows)

    def _new_code(self) -> str:
        while True:
            code = secrets.token_hex(5)
            if self.storage.participant(code) is None:
                return code

    def _add_external_ids(self, participant: dict[str, Any], ids: dict[str, str],
                          recruitment_id: str | None) -> None:
        if not ids or participant["step"] in TERMINAL:
            return
        known = json.loads(participant["external_ids"] or "{}")
        if {**known, **ids} != known:
            self.storage.update("participants", participant["id"],
                                {"external_ids": to_json({**known, **ids})})
        if recruitment_id and participant["recruitment_id"] is None and self._find(
                None, recruitment_id) is None:
            self.storage.update("participants", participant["id"],
                                {"recruitment_id": recruitment_id})

    def join(self, code: Any) -> dict[str, Any]:
        """Check a connection's code: the reply is the state rebuilt from SQLite. (The web
        layer then binds the connection with ``claim``.) An unknown code is not logged:
        nothing is stored for connections that never joined."""
        if not isinstance(code, str) or not CODE.match(code):
            return self._refuse(None, "join", None, Rejected("bad-code"), {"code": code})
        if self.storage.participant(code) is None:
            return self._refuse(None, "join", None,
                                Rejected("unknown-participant", code), {"code": code})
        return {"ok": True, "state": self.state(code)}

    def claim(self, code: str, browser: str, sid: str, processes: Processes) -> list[str] | None:
        """Bind the code to this browser and record the connection as its one tab, in one
        transaction (``study.web.participant.binding``); returns the sids of the tabs it
        displaced, or None when another browser holds the code."""
        idle = self.protocol.recruitment.binding_idle_minutes * 60.0
        with self.storage.event():
            participant = self.storage.participant(code)
            if participant is None or not binding.claim(self.storage, participant, browser,
                                                        self.clock(), idle):
                return None
            displaced = binding.displace(self.storage, code, sid)
            processes.connected(sid, code)
        return displaced

    def refuse(self, event: str, code: str, rejection: Rejected, payload: Any,
               with_state: bool = True) -> dict[str, Any]:
        """Log and answer a message the web layer refuses before ``handle`` (a payload too
        deep to decode, another browser's join); the state only goes to the code's own tab."""
        participant = self.storage.participant(code)
        reply = self._refuse(participant, event, None, rejection, payload)
        if not with_state:
            reply.pop("state", None)
        return reply

    # --- messages -----------------------------------------------------------------------

    def handle(self, event: str, code: str | None, payload: Any,
               tab: str | None = None) -> dict[str, Any]:
        """Check and apply one client message; the reply is the ack of the socket protocol.

        Size and rate are checked first, by code alone (the rate may ask Redis). Then the
        participant's row is read, the sending ``tab`` (a connection's sid) checked to be
        the code's current one, the message checked and its effect written in one write
        transaction: participants never wait for each other beyond SQLite's single writer,
        and two tabs or processes acting for one participant are applied one after the
        other. A displaced tab's message raises ``binding.Displaced`` and is stored
        nowhere; whatever else goes wrong inside is a logged refusal with an ack."""
        participant: dict[str, Any] | None = None
        msg_id = payload.get("msg_id") if isinstance(payload, dict) else None
        try:
            if code:
                self.admission.admit(code, event, payload)  # size and rate
            # what a refused or failed message queued was rolled back with it: not sent
            with self.outbox.forgotten_on_failure(), self.storage.event():
                participant = self.storage.participant(code) if code else None
                if participant is None:
                    raise Rejected("not-joined", "send join with a participant code first")
                if tab is not None:
                    binding.ensure_current(self.storage, tab, participant["code"])
                self.admission.check(participant, event)  # holds
                msg_id = self._check_message(participant, payload)
                now = self.clock()
                self._record_message(participant, msg_id, event, now)
                self.handlers[event](participant, payload, now)
                self.outbox.locate()
        except Rejected as rejection:  # refused before the read: the sender is read now
            participant = participant or (self.storage.participant(code) if code else None)
            reply = self._refuse(participant, event, msg_id, rejection, payload)
        except StorageUnavailable:  # nothing was stored: the page sends it again later
            reply = unavailable()
        except binding.Displaced:  # the web layer answers the old tab: nothing to log
            raise
        except Exception as error:  # a handler bug must not lose the ack or the log
            log.exception("message %s of %s failed", event, code)
            reply = self._refuse(participant, event, msg_id,
                                 Rejected("malformed", type(error).__name__), payload)
        else:
            # The ack carries the new state to the tab that sent the message (the one tab
            # of this participant: another is told it was displaced). A placed element
            # changes nothing the page shows, so its ack is bare: it is most messages.
            reply = {"ok": True} if event == "progress" else {
                "ok": True, "state": self.state(participant["code"])}
        self.outbox.flush()
        return reply

    @property
    def handlers(self) -> dict[str, Callable[[dict[str, Any], Any, float], None]]:
        """The participant messages (``study.web.participant.sockets.EVENTS``) and what
        applies them."""
        return {"submit": self.steps.submit, "start_round": self.rounds.start_round,
                "cookie": self.rounds.cookie, "progress": self.rounds.progress,
                "probe": self.probes.answer, "withdraw": self.steps.withdraw}

    def _check_message(self, participant: dict[str, Any], payload: Any) -> str:
        if not isinstance(payload, dict):
            raise Rejected("malformed", "the payload must be an object")
        msg_id = payload.get("msg_id")
        if not isinstance(msg_id, str) or not MSG_ID.match(msg_id):
            raise Rejected("missing-msg-id", "msg_id must be 8-64 of [A-Za-z0-9_-]")
        if participant["step"] in TERMINAL:
            raise Rejected("finished", f"the study has ended ({participant['step']})")
        return msg_id

    def _record_message(self, participant: dict[str, Any], msg_id: str, event: str,
                        now: float) -> None:
        """Log the accepted message; its id is unique per participant (the table's unique
        index), so a message sent again is refused by the insert itself, not by a read
        before it that every message would pay for."""
        try:
            self.storage.insert("messages", {"participant_id": participant["id"],
                                             "msg_id": msg_id, "event": event, "at": now})
        except sqlite3.IntegrityError as error:
            if "messages.participant_id, messages.msg_id" not in str(error):
                raise
            raise Rejected("duplicate", f"message {msg_id} was already accepted") from None

    def _refuse(self, participant: dict[str, Any] | None, event: str, msg_id: Any,
                rejection: Rejected, payload: Any) -> dict[str, Any]:
        if participant is not None:  # refusals of unknown senders are only counted
            try:
                # an id that is not one (a lone surrogate SQLite cannot store, say) is
                # left in the capped payload alone
                self.storage.reject(participant["id"], event,
                                    msg_id if isinstance(msg_id, str) and MSG_ID.match(msg_id)
                                    else None,
                                    rejection.reason, rejection.detail, payload, self.clock())
            except StorageUnavailable:  # a refusal is stored too: asked again once it can be
                return unavailable()
        reply: dict[str, Any] = {"ok": False, "error": "rejected", "reason": rejection.reason,
                                 "detail": rejection.detail}
        if participant is not None and self.storage.participant(participant["code"]):
            reply["state"] = self.state(participant["code"])
        return reply

    # --- the parts' calls from outside a participant's message ------------------------

    def state(self, code: str) -> dict[str, Any]:
        """Everything the participant's page needs, rebuilt from the database."""
        return self.page.state(code)

    def sync(self, code: str) -> dict[str, Any]:
        """The answer to ``sync``: the state again, for a page that may have missed a push
        (a lost push or a message queue away must strand nobody). It changes nothing, so it
        passes holds and the study's end and is not stored; only the participant's message
        rate bounds it."""
        if not self.admission.limiter.allow(code):
            return self.refuse("sync", code, Rejected("rate-limited", "too many messages"),
                               None)
        return {"ok": True, "state": self.state(code)}

    def push_states(self, participant_ids: set[int]) -> None:
        """Push the page state of each of these participants (after their team changed)."""
        self.outbox.push_states(participant_ids)

    def announce(self, code: str) -> None:
        """Push the participant's page state (after a change made outside their page)."""
        self.outbox.announce(code)

    def withdraw_with_link(self, token: str) -> bool:
        """Withdraw the participant of the final page's private link (``Steps``)."""
        with self.outbox.forgotten_on_failure():
            return self.steps.withdraw_with_link(token)

    def withdraw_by_console(self, code: str, reason: str, remote_addr: str | None) -> None:
        """The experimenter withdraws a participant (``Steps``)."""
        with self.outbox.forgotten_on_failure():
            self.steps.withdraw_by_console(code, reason, remote_addr)

    def tick(self, now: float | None = None, reason: str = "deadline",
             alive_until: float | None = None, share: Share = EVERYONE) -> int:
        """Close every running round of ``share`` whose deadline has passed by ``now``;
        returns how many (``Rounds``)."""
        with self.outbox.forgotten_on_failure():
            return self.rounds.tick(now, reason, alive_until, share)

    def recover(self, alive_until: float | None) -> int:
        """At start: close the rounds whose deadline passed while the study was down."""
        return self.rounds.recover(alive_until)

    def next_deadline(self, share: Share = EVERYONE) -> float | None:
        """When to tick next: the earliest deadline of a running round of ``share``, or a
        team's timer."""
        return self.rounds.next_deadline(share)

    def form_pending_teams(self) -> int:
        """Form the teams that a crash left unformed; returns how many (``AgentTeam``)."""
        return self.agent_team.form_pending_teams()
