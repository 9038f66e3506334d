"""Tidy exports of a study database: one CSV and one Parquet file per table, a codebook that
documents every column, and the protocol and pool metadata the data were collected under.

The database is opened read-only, so an export can run while the server is still collecting.
The codebook below is the single place where columns are explained for analysts; a test
checks it against the live schema so a new column cannot leave the storage undocumented.
"""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import tomllib
import zipfile
from dataclasses import dataclass
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

import pandas as pd

from study.allocation.terms import ALGORITHMS, DEFAULT_FEA_WEIGHT, preset_terms

TASK_TYPES = "0 = squares, 1 = letters"
TASK_NAMES = "squares, letters"
EPOCH = "seconds since 1970-01-01 UTC (server clock)"
STEPS = ("consent, themes, preferences, practice, lobby (real teams), teammate, then per "
         "collaborative session n = 1..k (one per condition, k = 2 to 4) intro-n, session-n, "
         "questionnaire-n, then post, debrief, done; terminal: declined, withdrawn, "
         "unmatched, dropped (real teams)")
SESSIONS = "1..k, one per condition of the protocol (k = 2 to 4)"
SEAT_TERMS = "the seat's human index in its team"


@dataclass(frozen=True)
class Column:
    """One documented column: what it holds, in which units, and which values it may take."""

    name: str
    type: str
    meaning: str
    units: str = ""
    allowed: str = ""


@dataclass(frozen=True)
class Table:
    """One documented table: what a row is, and its columns in schema order."""

    name: str
    row: str
    columns: tuple[Column, ...]


def _id(meaning: str = "row id") -> Column:
    return Column("id", "INTEGER", meaning, allowed="positive, unique")


def _fk(name: str, table: str, nullable: bool = False) -> Column:
    return Column(name, "INTEGER", f"id of the row in `{table}`" + (" (may be empty)"
                                                                     if nullable else ""),
                  allowed=f"{table}.id" + (" or empty" if nullable else ""))


def _at(name: str = "at", meaning: str = "when this row was recorded") -> Column:
    return Column(name, "REAL", meaning, units=EPOCH)


def _task(prefix: str = "", whose: str = "the cookie") -> tuple[Column, Column]:
    return (Column(f"{prefix}task_type", "INTEGER", f"task type of {whose}", allowed=TASK_TYPES),
            Column(f"{prefix}task_name", "TEXT", f"name of {whose}'s task type",
                   allowed=TASK_NAMES))


CODEBOOK: tuple[Table, ...] = (
    Table("participants", "one participant code (one link)", (
        _id(),
        Column("code", "TEXT", "the code in the participant link /p/<code>", allowed="unique"),
        Column("protocol", "TEXT", "name of the protocol the participant took part under"),
        _at("created_at", "when the link was created (or the participant enrolled)"),
        Column("step", "TEXT", "the participant's current or last step", allowed=STEPS),
        Column("condition_order", "TEXT (JSON)",
               "condition ids in the order the participant meets them",
               allowed='JSON list, e.g. ["efficient", "fair"]'),
        Column("external_ids", "TEXT (JSON)", "recruitment-platform parameters from the link",
               allowed='JSON object, e.g. {"PROLIFIC_PID": "..."}'),
        Column("consent", "TEXT", "answer to the consent page",
               allowed="given, declined, empty (not answered)"),
        _at("consent_at", "when consent was answered"),
        Column("data_consent", "TEXT", "re-consent to data use at the debrief",
               allowed="given, withdrawn, empty"),
        _at("finished_at", "when the participant reached `done`"),
        _at("withdrawn_at", "when the participant withdrew"),
        Column("robots_identical", "INTEGER", "whether two of the robots' plans for this "
               "participant were the same round by round (the manipulation failed; shown in "
               "the console)", allowed="0, 1, empty before the teammate was chosen"),
        Column("recruitment_id", "TEXT", "the recruitment platform's participant id (the "
               "protocol's id_parameter); erased by a withdrawal; a declined consent keeps "
               "only its hash, so the id finds the declined page again",
               allowed="unique; sha256:<64 hex digits> after a declined consent; or empty"),
        Column("origin", "TEXT", "how the participant was enrolled",
               allowed="console, open, recruitment"),
        Column("themes", "TEXT", "the theme on each cookie type for this participant, as "
               "assigned after the ratings and shown from practice on (JSON list: squares, "
               "letters)", allowed="theme ids of the protocol, empty before the ratings"),
        Column("themes_rule", "TEXT", "what decided `themes`: fixed (the protocol's "
               "[cookies] themes for everyone), by-rating (the theme rated higher on the "
               "protocol's preferred_on cookie), tied (equal ratings: the [cookies] themes)",
               allowed="fixed, by-rating, tied, empty before the ratings"),
        Column("withdrawn_from", "TEXT", "the furthest step the participant had entered "
               "when they withdrew, read from the step log before it was erased (the "
               "report's flow places the withdrawal there)",
               allowed="a step of `step` before withdrawn, or empty"),
        Column("tie_preferred", "INTEGER", "with equal theme ratings under the protocol's "
               "tied_ratings = \"random\": the task type drawn at the ratings to count as "
               "the one the participant prefers (the live team's type reads their correlation "
               "from it)", allowed="0 (squares), 1 (letters), or empty"),
    )),
    Table("steps", "one step reached by a participant (the journey's event log)", (
        _id(), _fk("participant_id", "participants"),
        Column("step", "TEXT", "the step entered", allowed=STEPS),
        _at(),
    )),
    Table("probes", "one round probe asked of one person after one collaborative round "
          "(the protocol's [[probes]]; a row is made when the round closes)", (
        _id(), _fk("participant_id", "participants"), _fk("session_id", "sessions"),
        _fk("round_id", "rounds"),
        Column("session_number", "INTEGER", "the session the round belongs to",
               allowed=SESSIONS),
        Column("round_number", "INTEGER", "the round within its session that the probe "
               "followed", allowed="1..rounds of a session"),
        Column("probe", "TEXT", "the probe's id in the protocol"),
        _at("shown_at", "when the page reported showing the probe (empty if never shown)"),
        _at("deadline", "when the probe closed: the round's close plus the probe's seconds"),
        _at("answered_at", "when the answer arrived (empty if not answered)"),
        Column("value", "INTEGER", "the point tapped on the probe's scale (the first "
               "answer; later ones are refused)", units="scale points",
               allowed="1..points of the probe's scale, or empty when not answered"),
        Column("missed", "INTEGER", "whether the deadline passed unanswered (set by the "
               "clock or the next state read after the deadline)", allowed="0, 1"),
    )),
    Table("answers", "one answer to one survey or questionnaire item", (
        _id(), _fk("participant_id", "participants"),
        Column("questionnaire", "TEXT", "which survey the item belongs to: the ratings, "
               "the questionnaire after session n, or the post-study one",
               allowed="preferences, session-1 .. session-k (k sessions, 2 to 4), post"),
        _fk("session_id", "sessions", nullable=True),
        Column("condition", "TEXT", "condition of the rated session (session questionnaires)",
               allowed="a condition id of the protocol, or empty"),
        Column("item", "TEXT", "item id from the protocol (a theme id for `preferences`)"),
        Column("label", "TEXT", "the item's short label from the protocol"),
        Column("value_number", "REAL", "numeric answer (likert points, numbers)",
               units="scale points for likert items",
               allowed="likert 1..points of the item's scale; numbers within [min, max]"),
        Column("value_text", "TEXT", "text answer (choices, open text); a rank item's "
               "robots first to last as condition ids joined by commas (fair,fea,efficient); "
               "a pairwise item's every two robots in the order met, a>b (a chosen) or a=b "
               "(the item's tie), joined by semicolons (efficient>fair;fea>efficient;fair=fea)",
               allowed="one of the item's options, free text up to max_length, or a rank or "
                       "pairwise answer over the robots the participant met"),
        _at(),
    )),
    Table("measurements", "one coefficient measured for a participant and cookie type", (
        _id(), _fk("participant_id", "participants"),
        Column("kind", "TEXT", "which coefficient", allowed="capability, preference"),
        *_task(),
        Column("value", "REAL", "the coefficient used by the allocation model",
               allowed="0.01..0.99"),
        _fk("round_id", "rounds", nullable=True),
        Column("cookies", "INTEGER", "capability: cookies finished in the measured round",
               units="cookies", allowed=">= 0"),
        Column("seconds", "REAL", "capability: duration of the measured round", units="s"),
        Column("speed", "REAL", "capability: speed in the measured round, in cookies of the "
               "protocol's [cookies] theme per second (the raw speed, kept also when the "
               "value is clipped); empty when the round was not a person's (implausible)",
               units="cookies/s"),
        Column("reference_speed", "REAL",
               "capability: the protocol's speed that counts as capability 1; "
               "value = clip(speed / reference_speed, 0.01, 0.99)", units="cookies/s"),
        Column("theme", "TEXT", "preference: the theme decorated on this cookie type",
               allowed="a theme id of the protocol"),
        Column("rating", "INTEGER", "preference: the rating of that theme; "
               "value = 0.01 + 0.98 * (rating - 1) / (points - 1)",
               units="scale points", allowed="1..points of the preference scale"),
        Column("fraction", "REAL", "capability: correct fraction of the cookie left "
               "unfinished at the end of the measured time (from `progress`); speed = "
               "(cookies + fraction) / seconds x theme_scale", allowed="0..1"),
        Column("cut_by_downtime", "INTEGER", "capability: 1 when server downtime cut the "
               "measured round, which is then measured over the time the server was up "
               "(with the type's first practice round added if that was under half the "
               "round)", allowed="0, 1"),
        Column("theme_scale", "REAL", "capability: elements of the measured round's cookie "
               "over those of the protocol's [cookies] theme cookie (themes assigned by "
               "rating differ in length); 1 for the protocol's own theme", allowed="> 0"),
        Column("clipped", "INTEGER", "capability: 1 when speed / reference_speed fell "
               "outside (0.01, 0.99), so the value was clipped and is not a measurement, "
               "or when the round was not a person's (implausible)", allowed="0, 1"),
        Column("implausible", "TEXT", "capability: why the measured round cannot be a "
               "person's decorating, so it is flagged instead of measured: no-element-reports "
               "(not one finished cookie came with an element report, which a page sends "
               "for every element but a cookie's last), faster-than-people (quicker than the "
               "human model's quickest plausible person on that cookie); empty when measured",
               allowed="no-element-reports, faster-than-people, or empty"),
        _at(),
    )),
    Table("teammates", "the simulated teammate matched to a participant", (
        Column("participant_id", "INTEGER", "id of the row in `participants` (primary key)",
               allowed="participants.id"),
        Column("pool", "TEXT", "the pool file the teammate's team came from"),
        Column("pool_team", "INTEGER", "index of the matched team in the pool", allowed=">= 0"),
        Column("participant_human", "INTEGER", "role (human index) the participant takes in "
               "the matched team", allowed="0, 1"),
        Column("distance", "REAL", "distance d (MODEL.md) between the participant and the "
               "matched member", allowed=">= 0"),
        Column("rule", "TEXT", "the protocol's teammate rule: typed (the nearest member "
               "whose live team meets the target and gives two plans), distinct (the nearest "
               "with two plans), nearest (the paper's Eq. 6)",
               allowed="typed, distinct, nearest"),
        Column("nearest_team", "INTEGER", "pool team of the member nearest by Eq. 6 (what "
               "Eq. 6 alone would have chosen)", allowed=">= 0"),
        Column("nearest_human", "INTEGER", "that member's human index", allowed="0, 1"),
        Column("nearest_distance", "REAL", "distance d of that member", allowed=">= 0"),
        Column("passed_over", "INTEGER", "members nearer than the chosen one, passed over "
               "(0: the chosen member is the Eq. 6 nearest)", allowed=">= 0"),
        Column("passed_same_plan", "INTEGER", "of those, passed over because both robots "
               "would have followed one plan", allowed=">= 0"),
        Column("passed_off_target", "INTEGER", "of those, passed over because their live "
               "team missed the target team", allowed=">= 0"),
        Column("live_type", "TEXT", "type of the live team (the participant's measured "
               "coefficients with the teammate's; MODEL.md, Team types)",
               allowed="mixed, twins, negative, mixed-reversed"),
        Column("participant_role", "TEXT", "the participant's role in the live team",
               allowed="most-capable, other"),
        Column("target_met", "INTEGER", "whether the live team meets the protocol's "
               "[pool.teammate] filter with the participant in its role (0: placed off "
               "target, only with unplaced = \"continue\" or another rule)", allowed="0, 1"),
        Column("c_squares", "REAL", "teammate's capability on squares", allowed="0.01..0.99"),
        Column("c_letters", "REAL", "teammate's capability on letters", allowed="0.01..0.99"),
        Column("p_squares", "REAL", "teammate's preference for squares", allowed="0.01..0.99"),
        Column("p_letters", "REAL", "teammate's preference for letters", allowed="0.01..0.99"),
        _at(),
    )),
    Table("sessions", "the practice session (number 0) or a collaborative session", (
        _id(), _fk("participant_id", "participants"),
        Column("number", "INTEGER", "session number", allowed=f"0 practice, {SESSIONS}"),
        Column("kind", "TEXT", "session kind", allowed="practice, collaborative"),
        Column("condition", "TEXT", "condition id of a collaborative session",
               allowed="a condition id of the protocol, or empty (practice)"),
        Column("algorithm", "TEXT", "allocation algorithm the robot ran",
               allowed="efficient, fair, fea, the id of an [[algorithms]] table, or empty"),
        Column("robot", "TEXT", "the robot's name shown to the participant"),
        Column("w", "REAL", "FEA weight on efficiency", allowed="0..1 or empty"),
        Column("fea_lo", "REAL", "lower bound scaling |FE| into FE' (FEA, or a declared "
               "algorithm's fair_equity term)"),
        Column("fea_hi", "REAL", "upper bound scaling |FE| into FE'"),
        Column("round_order", "TEXT", "the solver's round order",
               allowed="default, anytime-fair, or empty"),
        Column("participant_human", "INTEGER", "the participant's human index in the live team",
               allowed="0, 1, or empty"),
        Column("team_c", "TEXT (JSON)", "live team capabilities [human][type]",
               allowed="JSON 2x2 list of 0.01..0.99"),
        Column("team_p", "TEXT (JSON)", "live team preferences [human][type]",
               allowed="JSON 2x2 list of 0.01..0.99"),
        Column("goal", "TEXT (JSON)", "the policy's goal allocation [human][type] at the start",
               units="kits"),
        Column("plan", "TEXT (JSON)", "the policy's plan at the start: "
               "[[type for human 0, type for human 1], ...] one pair per round",
               allowed=TASK_TYPES),
        Column("reward", "REAL", "the goal reward of that plan"),
        Column("rounds", "INTEGER", "rounds in this session", units="rounds"),
        _at("created_at", "when the session and its policy were set up"),
        _at("finished_at", "when the session's last round closed"),
        _fk("team_id", "teams", nullable=True),
        Column("algorithm_declaration", "TEXT (JSON)", "the algorithm as data: id, preset, "
               "terms {term: weight}, fea_bounds [lo, hi], memory (\"study\": counts the "
               "earlier sessions' kits), python (module:function of a goal reward given as "
               "code) and python_sha256 (its file's digest) (docs/model.md, Algorithms as "
               "data)"),
        Column("history", "TEXT (JSON)", "for an algorithm with memory over the study: the "
               "kits each human got in the earlier sessions, which this session's policy "
               "counted [human][type]", units="kits", allowed="JSON list, or empty"),
    )),
    Table("rounds", "one timed round of one participant", (
        _id(), _fk("session_id", "sessions"), _fk("participant_id", "participants"),
        Column("number", "INTEGER", "round number within the session", allowed=">= 1"),
        *_task(whose="the participant's kit"),
        Column("teammate_task_type", "INTEGER", "task type of the teammate's kit",
               allowed=TASK_TYPES + ", empty in practice"),
        Column("theme", "TEXT", "theme of the participant's cookie in this round",
               allowed="a theme id of the protocol"),
        Column("teammate_theme", "TEXT", "theme of the teammate's cookie",
               allowed="a theme id of the protocol, empty in practice"),
        _at("started_at", "when the participant started the round"),
        _at("deadline", "when the round closes (stored at start)"),
        Column("seconds", "REAL", "round duration", units="s"),
        _at("closed_at", "when the round was closed"),
        Column("close_reason", "TEXT", "how the round was closed",
               allowed="deadline (by the scheduler in time), late (by the scheduler more "
                       "than 5 s after its deadline: the database could not be written, e.g. "
                       "a full disk), recovery (at server start, after its deadline passed "
                       "while the server was down), or empty (still running)"),
        Column("participant_cookies", "INTEGER", "cookies counted for the participant",
               units="cookies", allowed=">= 0"),
        Column("teammate_cookies", "INTEGER", "cookies finished by the simulated teammate "
               "(stored when the round closes)", units="cookies", allowed=">= 0"),
        _at("alive_until", "for a round cut by server downtime (closed by recovery): the "
            "study's last sign of life before the crash; the teammate's cookies count only "
            "up to it (empty otherwise)"),
        Column("close_delay", "REAL", "how late the round closed: closed_at - deadline (the "
               "cookies of both count only up to the deadline); empty while running and for "
               "rounds closed before this column existed", units="s", allowed=">= 0"),
        _fk("team_round_id", "team_rounds", nullable=True),
    )),
    Table("allocations", "the kit the robot gave one human in one collaborative round", (
        _id(), _fk("round_id", "rounds"), _fk("session_id", "sessions"),
        _fk("participant_id", "participants"),
        Column("round", "INTEGER", "round number within the session", allowed=">= 1"),
        Column("human", "INTEGER", "human index in the live team", allowed="0, 1"),
        Column("role", "TEXT", "who that human is", allowed="participant, teammate"),
        *_task(whose="the kit"),
        Column("held_before", "TEXT (JSON)",
               "kits held [human][type] when the policy chose this kit", units="kits"),
        _at(),
    )),
    Table("cookies", "one finished cookie at either station", (
        _id(), _fk("round_id", "rounds"), _fk("participant_id", "participants"),
        Column("actor", "TEXT", "who decorated it", allowed="participant, teammate"),
        Column("number", "INTEGER", "1-based count within the round and actor", allowed=">= 1"),
        *_task(),
        _at("finished_at", "when the cookie was finished"),
        Column("seconds", "REAL", "time since the round started", units="s"),
        Column("content", "TEXT (JSON)", "what the participant submitted",
               allowed="letters string, or JSON list of filled box indices; empty for the "
                       "teammate"),
        Column("msg_id", "TEXT", "the client's message id (idempotency key)",
               allowed="8-64 of [A-Za-z0-9_-], empty for the teammate"),
    )),
    Table("progress", "one element placed or taken off a participant's cookie: the cookie "
          "as then decorated, checked against the round's target", (
        _id(), _fk("round_id", "rounds"), _fk("participant_id", "participants"),
        Column("cookie", "INTEGER", "which cookie of the round it belongs to (1-based)",
               allowed=">= 1"),
        _at("at", "when the server received it"),
        Column("placed", "INTEGER", "elements on the cookie (letters, filled boxes)",
               allowed=">= 0"),
        Column("correct", "INTEGER", "elements counting towards the target: letters, the "
               "prefix that spells it; squares, right boxes minus wrong ones (at least 0)",
               allowed=">= 0"),
        Column("fraction", "REAL", "correct / elements of the target", allowed="0..1"),
        Column("msg_id", "TEXT", "the client's message id", allowed="8-64 of [A-Za-z0-9_-]"),
        Column("content", "TEXT (JSON)", "the elements on the cookie, as sent (a page opened "
               "again mid-round redraws the latest)",
               allowed="letters string in order, or JSON list of filled box indices; empty "
                       "in rows stored before it was kept"),
    )),
    Table("lobby", "one person's wait after practice for a real team (docs/teams.md)", (
        _id(), _fk("participant_id", "participants"),
        _at("entered_at", "when they started waiting"),
        _at("individual_deadline", "when their own timer runs out (empty: no such timer)"),
        _at("left_at", "when they left the lobby"),
        Column("outcome", "TEXT", "how the wait ended",
               allowed="team, timeout, left, or empty (still waiting)"),
        _fk("team_id", "teams", nullable=True),
    )),
    Table("teams", "one real team: several people under one robot (docs/teams.md)", (
        _id(), Column("protocol", "TEXT", "the protocol the team played"),
        Column("humans", "INTEGER", "seats", allowed="2, 3"),
        Column("persons", "INTEGER", "seats people took when it formed", allowed=">= 1"),
        Column("formation", "TEXT", "how the protocol forms teams", allowed="arrival, traits"),
        _at("formed_at", "when the team formed"),
        Column("formed_by", "TEXT", "what formed it", allowed="arrival, traits, "
               "shared-timeout, individual-timeout"),
        Column("condition_order", "TEXT (JSON)", "the team's order of conditions"),
        Column("live_type", "TEXT", "team type of the seats' coefficients (MODEL.md)",
               allowed="mixed, twins, negative, mixed-reversed"),
        Column("team_c", "TEXT (JSON)", "capabilities [seat][type]", allowed="0.01..0.99"),
        Column("team_p", "TEXT (JSON)", "preferences [seat][type]", allowed="0.01..0.99"),
        Column("session", "INTEGER", "the session the team is in",
               allowed=f"0 (not started), {SESSIONS}"),
        _at("next_round_at", "when the server starts the team's next round (empty: waiting "
            "for its members or finished)"),
        _at("session_started_at", "when the current session started"),
        _at("finished_at", "when the last round closed, or nobody was left to play"),
    )),
    Table("seats", "one seat of a real team, played by a person or an agent", (
        _id(), _fk("team_id", "teams"),
        Column("seat", "INTEGER", SEAT_TERMS, allowed="0, 1, 2"),
        Column("kind", "TEXT", "who took the seat when the team formed",
               allowed="person, agent"),
        _fk("participant_id", "participants", nullable=True),
        *(Column(f"{kind}_{name}", "REAL", f"{meaning} on {name}: the person's measured or "
                 "the pool member's", allowed="0.01..0.99")
          for kind, meaning in (("c", "capability"), ("p", "preference"))
          for name in ("squares", "letters")),
        Column("pool_team", "INTEGER", "an agent seat's pool team (row index)",
               allowed=">= 0 or empty"),
        _at("joined_at", "when the seat was taken"),
        _at("away_since", "since when the person's page has been closed (empty: open)"),
        _at("dropped_at", "when an agent took the person's seat over (empty: never)"),
        Column("drop_reason", "TEXT", "why", allowed="away, late, withdrawn, aborted, or "
               "empty"),
        Column("agent_from_session", "INTEGER", "the first session the agent played",
               allowed=f"{SESSIONS}, or empty"),
        Column("agent_from_round", "INTEGER", "the first round (of that session) the agent "
               "played", allowed=">= 1 or empty"),
    )),
    Table("team_rounds", "one round of a real team, on one server clock", (
        _id(), _fk("team_id", "teams"),
        Column("session", "INTEGER", "session number", allowed=SESSIONS),
        Column("number", "INTEGER", "round number within the session", allowed=">= 1"),
        Column("condition", "TEXT", "the session's condition id"),
        _at("started_at", "when the server started the round"),
        _at("deadline", "when it closes"),
        Column("seconds", "REAL", "round duration", units="s"),
        _at("closed_at", "when it was closed"),
        Column("close_reason", "TEXT", "how, as its people's rounds (rounds.close_reason)",
               allowed="deadline, late, recovery, or empty (running)"),
    )),
    Table("team_allocations", "the kit the robot gave one seat in one team round", (
        _id(), _fk("team_round_id", "team_rounds"), _fk("team_id", "teams"),
        Column("session", "INTEGER", "session number", allowed=SESSIONS),
        Column("round", "INTEGER", "round number within the session", allowed=">= 1"),
        Column("seat", "INTEGER", SEAT_TERMS, allowed="0, 1, 2"),
        *_task(whose="the kit"),
        Column("held_before", "TEXT (JSON)", "kits held [seat][type] when the policy chose",
               units="kits"),
        _at(),
    )),
    Table("seat_cookies", "one cookie an agent finished in a team round (people's are in "
          "`cookies`)", (
        _id(), _fk("team_round_id", "team_rounds"), _fk("team_id", "teams"),
        Column("seat", "INTEGER", SEAT_TERMS, allowed="0, 1, 2"),
        Column("number", "INTEGER", "1-based count within the round and seat", allowed=">= 1"),
        Column("task_type", "INTEGER", "task type of the cookie", allowed=TASK_TYPES),
        _at("finished_at", "when the agent finished it"),
        Column("seconds", "REAL", "time since the round started", units="s"),
    )),
    Table("messages", "one accepted client message id (idempotency log)", (
        _id(), _fk("participant_id", "participants"),
        Column("msg_id", "TEXT", "the client's message id", allowed="8-64 of [A-Za-z0-9_-]"),
        Column("event", "TEXT", "Socket.IO event name",
               allowed="submit, start_round, cookie, progress, withdraw"),
        _at(),
    )),
    Table("rejections", "one refused client message and why", (
        _id(), _fk("participant_id", "participants", nullable=True),
        Column("event", "TEXT", "Socket.IO event name"),
        Column("msg_id", "TEXT", "the client's message id, if any"),
        Column("reason", "TEXT", "short refusal code (docs/socket-protocol.md)",
               allowed="not-joined, unknown-participant, bad-code, malformed, missing-msg-id, "
                       "duplicate, out-of-order, invalid-answer, round-closed, wrong-cookie, "
                       "too-fast, finished, and the limits of the deployment"),
        Column("detail", "TEXT", "human-readable detail", units="<= 256 characters"),
        Column("payload", "TEXT (JSON)", "the payload as received, truncated",
               units="<= 256 characters"),
        _at(),
    )),
    Table("rejection_counts", "refusals of one participant for one reason beyond the first 5 "
          "(which are in rejections)", (
        _id(), _fk("participant_id", "participants"),
        Column("reason", "TEXT", "short refusal code, as in rejections"),
        Column("count", "INTEGER", "how many further refusals"),
        _at("last_at", "the latest of them"),
    )),
    Table("bindings", "the browser a participant code is bound to (a code is not a key)", (
        _id(), _fk("participant_id", "participants"),
        Column("browser", "TEXT", "SHA-256 of the browser's secret cookie",
               allowed="64 hex digits"),
        _at("bound_at", "when this browser took the code"),
        _at("seen_at", "its latest join"),
    )),
    Table("withdrawal_links", "the private link a finished participant can withdraw with", (
        _id(), _fk("participant_id", "participants"),
        Column("token", "TEXT", "the secret of the link `/withdraw/<token>` shown on the final "
               "page (erased with the data when used)", units="24 characters"),
        _at("created_at", "when the participant reached the final page"),
    )),
    Table("console_status", "one participant the experimenter paused, aborted, flagged or "
          "annotated in the console", (
        Column("participant_id", "INTEGER", "id of the row in `participants` (primary key)",
               allowed="participants.id"),
        Column("status", "TEXT", "the participant's hold",
               allowed="active, paused (may not start rounds or pages), aborted (may only "
                       "withdraw)"),
        Column("flagged", "INTEGER", "whether the experimenter flagged the participant",
               allowed="0, 1"),
        Column("note", "TEXT", "the experimenter's latest note", units="<= 2000 characters"),
        _at("at", "when the status last changed"),
    )),
    Table("console_actions", "one thing the experimenter did in the console (audit log)", (
        _id(),
        _at("at", "when it was done"),
        Column("action", "TEXT", "what was done",
               allowed="login, login-failed, logout, create-links, pause, resume, abort, flag, "
                       "unflag, note, export, withdraw, release (a code freed from its browser)"),
        Column("participant_id", "INTEGER", "the participant concerned, if any (a withdrawal "
               "erases that participant's rows here too)", allowed="participants.id or empty"),
        Column("code", "TEXT", "that participant's code, if any"),
        Column("note", "TEXT", "the experimenter's note", units="<= 2000 characters"),
        Column("detail", "TEXT (JSON)", "what changed: new status, codes and condition "
               "orders of created links, rows exported"),
        Column("remote_addr", "TEXT", "address the console was used from"),
    )),
    Table("processes", "one server process sharing the database (no participant data)", (
        Column("id", "TEXT", "host, pid and a random suffix (primary key)"),
        Column("pid", "INTEGER", "operating-system process id"),
        Column("host", "TEXT", "host name"),
        _at("started_at", "its first heartbeat"),
        _at("last_seen", "its latest heartbeat (every 0.5 s while alive)"),
        Column("lock_wait", "REAL", "time its events waited for another process's write "
               "lock, as of its latest heartbeat", units="s"),
        Column("lock_held", "REAL", "time it held the write lock (its transactions, from "
               "the lock taken to the commit), as of its latest heartbeat", units="s"),
        Column("syncs", "INTEGER", "syncs of the write-ahead log it ran under full "
               "durability, as of its latest heartbeat (0 under normal)"),
        Column("sync_seconds", "REAL", "time those syncs took, from asking to the answer: "
               "what the commits they covered waited for the disk", units="s"),
    )),
    Table("leases", "a role exactly one server process holds at a time", (
        Column("name", "TEXT", "the role (primary key)", allowed="round-scheduler"),
        Column("holder", "TEXT", "processes.id of the holder"),
        _at("expires_at", "when another process may take it over"),
        _at("renewed_at", "the holder's latest renewal"),
    )),
    Table("connections", "one live participant connection (no participant data beyond the "
          "code)", (
        Column("sid", "TEXT", "Socket.IO session id (primary key)"),
        Column("process", "TEXT", "processes.id of the process serving it"),
        Column("code", "TEXT", "the participant code it joined as"),
        _at("at", "when it joined"),
    )),
    Table("counters", "a server metric shared by the processes (no participant data)", (
        Column("name", "TEXT", "the metric (primary key)", allowed="unjoined-messages"),
        Column("count", "INTEGER", "its total"),
        _at("at", "its latest addition"),
    )),
    Table("console_sessions", "one logged-in experimenter console (logout deletes it)", (
        Column("id", "TEXT", "SHA-256 of the session's secret (primary key)"),
        _at("created_at", "the login"),
        _at("seen_at", "the latest console request"),
        Column("remote_addr", "TEXT", "address of the login"),
    )),
    Table("server_runs", "one start of the study server (the conditions data were collected "
          "under)", (
        _id(),
        _at("started_at", "when the server started"),
        Column("protocol", "TEXT", "name of the protocol served"),
        Column("protocol_path", "TEXT", "the protocol file as given to the server"),
        Column("protocol_sha256", "TEXT", "SHA-256 of the protocol file's text",
               allowed="64 hex digits"),
        Column("protocol_text", "TEXT", "the protocol file's full text at start"),
        Column("pool", "TEXT", "the team-pool file the teammates came from, if any"),
        Column("pool_metadata", "TEXT (JSON)", "the pool file's metadata (spec, seed, digest, "
               "FEA bounds, package versions)"),
        Column("version", "TEXT", "version of the study platform"),
    )),
    Table("bonus_exports", "one `study export --bonus` that wrote lines (docs/recruitment.md)", (
        _id(),
        _at("at", "when the files were written"),
        Column("again", "INTEGER", "whether it wrote lines exported before too (--again)",
               allowed="0, 1"),
        Column("source", "TEXT", "where the [bonus] rule came from: the database's protocol "
               "snapshot or a protocol file"),
        Column("rule", "TEXT (JSON)", "the [bonus] rule applied"),
        Column("currency", "TEXT", "ISO 4217 code of the amounts"),
        Column("lines", "INTEGER", "lines in bonus-details.csv", allowed=">= 1"),
        Column("people", "INTEGER", "lines in bonus.csv: recruitment ids paid", allowed=">= 0"),
        Column("total", "REAL", "the sum of bonus.csv's amounts", units="currency",
               allowed=">= 0"),
    )),
    Table("bonus_lines", "one participant's line of one bonus export, for one reason (a "
          "withdrawal keeps it: it records a payment, by code only)", (
        _id(), _fk("export_id", "bonus_exports"),
        Column("code", "TEXT", "the participant's code"),
        Column("reason", "TEXT", "what the line pays for",
               allowed="performance, lobby-wait, unmatched, teammate-dropped"),
        Column("amount", "REAL", "the amount, after the cap", units="currency",
               allowed=">= 0"),
    )),
)

CODEBOOK_FIELDS = ("table", "column", "type", "meaning", "units", "allowed")
# Spreadsheets run a cell starting with one of these as a formula (a participant's free
# text could start with "=HYPERLINK(...)"): CSV text cells are escaped, Parquet is not.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
FORMULA_NOTE = ("In the CSV files, a text cell starting with `=`, `+`, `-`, `@`, a tab or a "
                "carriage return has a single quote (`'`) put in front, so that a spreadsheet "
                "shows it as text instead of running it as a formula; remove that quote to "
                "get the raw text, which the Parquet files keep as it was. Numeric columns "
                "are never changed. Lines end in CRLF (RFC 4180); a text holding a comma, a "
                "quote or a line break is quoted.")


def codebook_frame(tables: tuple[Table, ...] = CODEBOOK) -> pd.DataFrame:
    """The codebook as one row per (table, column)."""
    rows = [(t.name, c.name, c.type, c.meaning, c.units, c.allowed)
            for t in tables for c in t.columns]
    return pd.DataFrame(rows, columns=list(CODEBOOK_FIELDS))


def codebook_markdown(tables: tuple[Table, ...] = CODEBOOK) -> str:
    """The codebook as Markdown: one section per table, one row per column."""
    lines = ["# Codebook", "", f"Times are {EPOCH}. Empty cells in the CSV files are missing "
             "values (SQL NULL). JSON columns hold small lists or objects as text.", "",
             FORMULA_NOTE, ""]
    for table in tables:
        lines += [f"## {table.name}", "", f"One row per {table.row}.", "",
                  "| column | type | meaning | units | allowed values |", "|---|---|---|---|---|"]
        lines += [f"| {c.name} | {c.type} | {c.meaning} | {c.units} | {c.allowed} |"
                  for c in table.columns]
        lines.append("")
    return "\n".join(lines)


# --- reading the database ----------------------------------------------------------------


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection: exporting must never change (or lock) a running study."""
    if not path.is_file():
        raise FileNotFoundError(f"no database at {path}")
    return sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)


def database_tables(connection: sqlite3.Connection) -> list[str]:
    rows = connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name").fetchall()
    return [name for (name,) in rows]


def table_columns(connection: sqlite3.Connection, table: str) -> list[tuple[str, str]]:
    """(name, declared type) of every column of ``table``, in schema order."""
    return [(row[1], row[2] or "") for row in connection.execute(
        f'PRAGMA table_info("{table}")').fetchall()]


def documented_schema(connection: sqlite3.Connection) -> tuple[Table, ...]:
    """The codebook restricted to what the database holds, plus any column it does not know.

    A column the codebook lacks is still exported (data is never dropped silently) and is
    marked undocumented, so the gap is visible in the codebook itself.
    """
    known = {t.name: t for t in CODEBOOK}
    present = database_tables(connection)
    ordered = [t.name for t in CODEBOOK if t.name in present]
    ordered += [name for name in present if name not in known]
    tables = []
    for name in ordered:
        documented = {c.name: c for c in known[name].columns} if name in known else {}
        columns = tuple(documented.get(column) or Column(column, kind or "?", "UNDOCUMENTED")
                        for column, kind in table_columns(connection, name))
        row = known[name].row if name in known else "UNDOCUMENTED table"
        tables.append(Table(name, row, columns))
    return tuple(tables)


def undocumented(tables: tuple[Table, ...]) -> list[str]:
    return [f"{t.name}.{c.name}" for t in tables for c in t.columns if c.meaning == "UNDOCUMENTED"]


def read_table(connection: sqlite3.Connection, table: Table) -> pd.DataFrame:
    """One table as a typed frame: nullable integers stay integers, texts stay texts."""
    frame = pd.read_sql_query(f'SELECT * FROM "{table.name}" ORDER BY rowid', connection)
    for column in table.columns:
        kind = column.type.split()[0].upper()
        if kind == "INTEGER":
            frame[column.name] = frame[column.name].astype("Int64")
        elif kind == "REAL":
            frame[column.name] = frame[column.name].astype("Float64")
        elif kind == "TEXT":
            frame[column.name] = frame[column.name].astype("string")
    return frame


# --- what the data were collected under -------------------------------------------------

RUNS_TABLE = "server_runs"


def record_server_run(storage: Any, protocol_path: Path, protocol_name: str,
                      pool_path: Path | str | None, at: float) -> None:
    """Snapshot the protocol text and pool metadata into the database at server start, so
    an export documents the exact conditions even if the files change later."""
    text = Path(protocol_path).read_text(encoding="utf-8")
    table = next(t for t in CODEBOOK if t.name == RUNS_TABLE)
    with storage.event() as db:
        db[RUNS_TABLE].create({c.name: _PY_TYPES[c.type.split()[0]] for c in table.columns},
                              pk="id", if_not_exists=True)
        db[RUNS_TABLE].insert({
            "started_at": at, "protocol": protocol_name, "protocol_path": str(protocol_path),
            "protocol_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "protocol_text": text, "pool": None if pool_path is None else str(pool_path),
            "pool_metadata": _pool_metadata(pool_path), "version": _version()})


_PY_TYPES = {"INTEGER": int, "REAL": float, "TEXT": str}


def _pool_metadata(pool_path: Path | str | None) -> str | None:
    if pool_path is None or not Path(pool_path).is_file():
        return None
    from study.pool.store import read_metadata

    return json.dumps(read_metadata(pool_path), sort_keys=True)


def _version() -> str:
    try:
        return package_metadata.version("fair-teaming-study")
    except package_metadata.PackageNotFoundError:
        return "unknown"


def metadata_files(connection: sqlite3.Connection) -> dict[str, bytes]:
    """One protocol file per distinct protocol text and one JSON per pool, under
    ``metadata/``; a database without snapshots says so instead of guessing."""
    if RUNS_TABLE not in database_tables(connection):
        note = ("This database holds no server_runs snapshot, so the protocol and pool the "
                "data were collected under are not known to the export.\n")
        return {"metadata/MISSING.txt": note.encode()}
    files: dict[str, bytes] = {}
    rows = connection.execute(
        f"SELECT protocol, protocol_sha256, protocol_text, pool, pool_metadata "
        f"FROM {RUNS_TABLE} ORDER BY id").fetchall()
    for protocol, digest, text, pool, pool_metadata in rows:
        files[f"metadata/protocol-{protocol}-{digest[:12]}.toml"] = text.encode()
        files[f"metadata/algorithms-{protocol}-{digest[:12]}.json"] = json.dumps(
            condition_algorithms(text), indent=2).encode()
        if pool and pool_metadata:
            files[f"metadata/pool-{Path(pool).stem}.json"] = json.dumps(
                json.loads(pool_metadata), indent=2, sort_keys=True).encode()
    return files


def condition_algorithms(text: str) -> dict[str, Any]:
    """Per condition of a protocol's text, the algorithm its robot ran as data: its terms
    and weights, the bounds scaling a fair_equity term (its own or ``[pool.fea]``'s),
    memory, and the module:function of a goal reward given as code (docs/model.md,
    Algorithms as data). Read from the text alone, so an export never runs a lab's code."""
    data = tomllib.loads(text)
    declared = {table.get("id"): table for table in data.get("algorithms", [])}
    fea = data.get("pool", {}).get("fea", {})
    pool_bounds = fea.get("bounds")
    conditions = {}
    for condition in data.get("conditions", []):
        name = condition.get("algorithm")
        table = declared.get(name)
        if table is None:
            w = condition.get("w", DEFAULT_FEA_WEIGHT)
            terms = preset_terms(name, w) if name in ALGORITHMS else None
            bounds = condition.get("fea_bounds", "pool") if name == "fea" else None
            entry = {"algorithm": name, "preset": True, "terms": terms, "memory": None,
                     "python": None}
        else:
            bounds = table.get("fea_bounds") if "fair_equity" in table.get("terms", {}) else None
            entry = {"algorithm": name, "preset": False, "terms": table.get("terms"),
                     "memory": table.get("memory"), "python": table.get("python")}
        entry["fea_bounds"] = pool_bounds if bounds == "pool" else bounds
        entry["fea_bounds_from"] = ("[pool.fea]" if bounds == "pool"
                                    else "the protocol" if bounds is not None else None)
        conditions[condition.get("id")] = {"robot": condition.get("robot"), **entry}
    return {"conditions": conditions,
            "meaning": "docs/model.md, Algorithms as data: a goal reward is a weighted sum of "
                       "named terms; memory = \"study\" counts the kits of earlier sessions"}


# --- writing an export ------------------------------------------------------------------


@dataclass(frozen=True)
class Export:
    """The files of one export, by relative name, and what they hold."""

    files: dict[str, bytes]
    rows: dict[str, int]
    undocumented: list[str]


def build_export(db_path: Path) -> Export:
    """Every table as CSV and Parquet, the codebook (CSV and Markdown) and the metadata.

    All tables are read in one read transaction: the export is one snapshot of a running
    study (WAL lets the study write meanwhile), so its rows agree with each other."""
    connection = connect_read_only(Path(db_path))
    connection.execute("BEGIN")
    try:
        tables = documented_schema(connection)
        files: dict[str, bytes] = {}
        rows: dict[str, int] = {}
        for table in tables:
            frame = read_table(connection, table)
            rows[table.name] = len(frame)
            files[f"{table.name}.csv"] = csv_bytes(frame)
            files[f"{table.name}.parquet"] = _parquet_bytes(frame)
        files["codebook.csv"] = csv_bytes(codebook_frame(tables))
        files["codebook.md"] = codebook_markdown(tables).encode()
        files.update(metadata_files(connection))
    finally:
        connection.rollback()
        connection.close()
    return Export(files, rows, undocumented(tables))


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """``frame`` as CSV, its text cells escaped where a spreadsheet would run a formula.

    Lines end in CRLF (RFC 4180), so a text holding a carriage return is quoted rather
    than cut into two rows."""
    escaped = frame.copy()
    for name in frame.columns:
        if frame[name].dtype == object or isinstance(frame[name].dtype, pd.StringDtype):
            escaped[name] = frame[name].map(escape_formula)
    return escaped.to_csv(index=False, lineterminator="\r\n").encode()


def escape_formula(value: object) -> object:
    """A text starting as a formula, with a single quote in front (the OWASP rule for CSV
    injection); anything else, numbers and missing values included, as it is."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def write_export(export: Export, out: Path) -> list[Path]:
    """Write the files under ``out`` (created if needed); returns the paths written."""
    written = []
    for name, content in export.files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written.append(path)
    return written


def zip_export(export: Export) -> bytes:
    """The same files as one zip archive (the console's download)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in export.files.items():
            archive.writestr(name, content)
    return buffer.getvalue()
