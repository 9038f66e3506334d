// The experimenter's live view: draws the snapshot pushed on the /console namespace and
// counts time left down locally between pushes (deadline minus the server's clock).
"use strict";

const table = document.querySelector("#participants tbody");
const status = document.getElementById("live-status");
let snapshot = JSON.parse(document.getElementById("initial-snapshot").textContent);
let offset = snapshot.now - Date.now() / 1000; // server clock minus ours

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (className) td.className = className;
  return td;
}

function timeLeft(current) {
  if (!current || !current.running) return "";
  const left = current.deadline - (Date.now() / 1000 + offset);
  return left > 0 ? left.toFixed(0) + " s" : "closing";
}

function history(participant) {
  const parts = [];
  for (const session of participant.sessions) {
    const label = session.number === 0 ? "practice" : "S" + session.number + " " + (session.condition || "");
    const rounds = session.rounds.filter((r) => !r.running).map((r) => {
      const kits = r.teammate_kit ? r.kit[0] + "/" + r.teammate_kit[0] : r.kit[0];
      const cookies = r.teammate_cookies === null ? r.cookies : r.cookies + "/" + r.teammate_cookies;
      return r.number + ":" + kits + " " + cookies + (r.close_reason === "recovery" ? "ʳ" : "");
    });
    if (rounds.length) parts.push(label + ": " + rounds.join(" "));
  }
  return parts.join(" | ");
}

// Live fairness (docs/study-day.md): the session's kits so far, running F and FE against
// the robot's stored plan, whether it follows the plan, and the last probe answers.
function signed(value) {
  return (value < 0 ? "−" : "+") + Math.abs(value).toFixed(2);
}

function line(text, className) {
  const div = document.createElement("div");
  div.textContent = text;
  if (className) div.className = className;
  return div;
}

function probesText(probes) {
  return Object.entries(probes).map(([id, p]) => id + " " + p.value + " (S" + p.session + " R" + p.round + ")").join(", ");
}

function fairnessCell(fair) {
  const td = document.createElement("td");
  td.className = "fairness";
  if (!fair) return td;
  const now = fair.rounds - 1;
  const where = "S" + fair.session + " " + (fair.condition || "") + " · round " + fair.rounds + "/" + fair.of + " · ";
  const head = line(where);
  const follows = document.createElement("strong");
  follows.className = fair.follows ? "follows" : "warning";
  follows.textContent = fair.follows ? "follows the plan" : "off the plan from round " + fair.off_plan_from;
  head.append(follows);
  const kits = fair.people.map((person, h) => person + ": " +
    fair.types.map((type, j) => fair.kits[h][j] + " " + type).join(", ")).join(" · ");
  td.append(head, line("kits " + kits),
    line("F " + signed(fair.F[now]) + " (plan " + signed(fair.planned_F[now]) + ") · FE " +
         signed(fair.FE[now]) + " (plan " + signed(fair.planned_FE[now]) + ")", "metrics"),
    line("F by round " + fair.F.map(signed).join(" ") + " · plan " + fair.planned_F.map(signed).join(" "), "series"));
  const probes = Object.entries(fair.probes).filter(([, answers]) => Object.keys(answers).length)
    .map(([who, answers]) => who + ": " + probesText(answers));
  if (probes.length) td.append(line("last probes " + probes.join(" · "), "probes"));
  return td;
}

function fairnessPanel() {
  const body = document.querySelector("#fairness-rows tbody");
  if (!body) return;
  const conditions = snapshot.fairness || [];
  body.replaceChildren(...conditions.map((c) => {
    const tr = document.createElement("tr");
    tr.append(cell((c.condition || "") + (c.robot ? " (robot " + c.robot + ")" : ""), "condition"),
              cell(c.people),
              cell(c.F.toFixed(2) + " (plan " + c.planned_F.toFixed(2) + ")"),
              cell(c.FE.toFixed(2) + " (plan " + c.planned_FE.toFixed(2) + ")"),
              cell(Math.round(100 * c.following) + " %", c.following < 1 ? "warning" : ""));
    return tr;
  }));
  labelCells(body);
  document.getElementById("fairness-empty").hidden = conditions.length > 0;
}

function actionButton(code, action, label) {
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = label;
  button.addEventListener("click", () => act(code, action));
  return button;
}

async function act(code, action) {
  const withdraw = action === "withdraw";
  const question = withdraw
    ? "Withdraw " + code + ": every row of this participant is deleted, for good. Reason (required, logged):"
    : action + " " + code + " — note (optional):";
  const note = window.prompt(question, "");
  if (note === null || (withdraw && !note.trim())) return;
  const body = new URLSearchParams({action, note, csrf_token: window.CONSOLE.csrf});
  const reply = await fetch(window.CONSOLE.actionUrl + encodeURIComponent(code), {
    method: "POST", body, headers: {"Accept": "application/json", "X-CSRF-Token": window.CONSOLE.csrf},
  });
  if (!reply.ok) window.alert(action + " failed: " + reply.status);
  else if (finishedPanel.open) loadFinished(true);  // its rows are read, not pushed
}

// The steps that end a participant's study (the server's list).
const ENDS = window.CONSOLE.ends;

function actions(participant) {
  const td = document.createElement("td");
  td.className = "actions";
  const code = participant.code;
  const ended = ENDS.includes(participant.step);  // nothing left to hold or free
  if (!ended && participant.status === "active") td.append(actionButton(code, "pause", "Pause"));
  if (!ended && participant.status === "paused") td.append(actionButton(code, "resume", "Resume"));
  if (!ended && participant.status !== "aborted") td.append(actionButton(code, "abort", "Abort"));
  td.append(actionButton(code, participant.flagged ? "unflag" : "flag", participant.flagged ? "Unflag" : "Flag"));
  td.append(actionButton(code, "note", "Note"));
  if (participant.can_withdraw) td.append(actionButton(code, "withdraw", "Withdraw"));
  if (!ended) td.append(actionButton(code, "release", "Release"));  // free the code from its browser
  return td;
}

function row(participant) {
  const tr = document.createElement("tr");
  tr.className = participant.status + (participant.flagged ? " flagged" : "");
  const current = participant.current;
  const connected = participant.connections < 0 ? "?" : participant.connections > 0 ? "yes (" + participant.connections + ")" : "no";
  const place = current ? (current.session === 0 ? "practice" : "S" + current.session) + " · " + current.number + "/" + current.of : "";
  const cookies = current ? (current.teammate_cookies === null ? current.cookies : current.cookies + " / " + current.teammate_cookies) : "";
  const status = participant.status + (participant.flagged ? " ⚑" : "") + (participant.note ? " — " + participant.note : "");
  const step = cell(participant.step);
  if (participant.condition_order) {
    const order = document.createElement("small");
    order.textContent = " (" + participant.condition_order.join(" → ") + ")";
    step.append(order);
  }
  if (participant.robots_identical) {
    const same = document.createElement("strong");
    same.className = "warning";
    same.title = "Two robots follow the same plan for this participant: their sessions cannot be compared.";
    same.textContent = participant.condition_order && participant.condition_order.length > 2
      ? " same plan for two robots" : " same plan for both robots";
    step.append(same);
  }
  if (participant.probes) {
    const probes = document.createElement("small");
    probes.className = "probes";
    probes.textContent = " probes: " + participant.probes.answered + " answered, " + participant.probes.missed + " missed";
    step.append(probes);
  }
  if (participant.team && !participant.team.target_met) {
    const off = document.createElement("strong");
    off.className = "warning";
    off.title = "The live team is not the team under study (the teammate rule could not place this participant in it).";
    off.textContent = " off target: " + participant.team.type + ", " + participant.team.role;
    step.append(off);
  }
  tr.append(cell(participant.code, "code"), step, cell(status),
            cell(connected, participant.connections > 0 ? "online" : "offline"), cell(place),
            cell(timeLeft(current), "left"), cell(cookies), cell(history(participant), "history"),
            fairnessCell(participant.fairness), actions(participant));
  return tr;
}

// On a phone a row reads as a card: each cell shows its column's heading (console.css).
function headings(body) {
  return [...body.closest("table").querySelectorAll("thead th")].map((th) => {
    const main = th.firstChild.textContent.trim();
    const note = th.querySelector("small");
    return note ? main + " (" + note.textContent.trim().replace(/^\((.*)\)$/, "$1") + ")" : main;
  });
}

function labelCells(body) {
  const labels = headings(body);
  for (const tr of body.rows) [...tr.cells].forEach((td, i) => { td.dataset.label = labels[i] || ""; });
}

function targetLine() {
  let line = document.getElementById("target-team");
  if (!line) {
    line = document.createElement("p");
    line.id = "target-team";
    table.closest("table").before(line);
  }
  const counts = snapshot.target || {in_target: 0, off_target: 0, unmatched: 0};
  const clipped = counts.unmatched_clipped ?
    " (" + counts.unmatched_clipped + " of them for a clipped capability)" : "";
  line.textContent = "In the team under study: " + counts.in_target + " · off target: " +
    counts.off_target + " · could not be placed (unmatched): " + counts.unmatched + clipped;
  line.className = counts.off_target || counts.unmatched ? "warning" : "";
}

function percent(value) {
  return (100 * Math.min(1, Math.max(0, value))).toFixed(2) + "%";
}

function calibrationType(type) {
  const line = document.createElement("div");
  line.className = "calibration-type" + (type.amber ? " amber" : "");
  const name = document.createElement("strong");
  name.textContent = type.name;
  const strip = document.createElement("div");
  strip.className = "strip";
  strip.title = "0 to 1; shaded: the target range; red: clipped or outside";
  if (type.target) {
    const range = document.createElement("span");
    range.className = "range";
    range.style.left = percent(type.target[0]);
    range.style.width = percent(type.target[1] - type.target[0]);
    strip.append(range);
  }
  for (const point of type.values) {
    const dot = document.createElement("span");
    dot.className = "dot" + (point.off ? " off" : "");
    dot.style.left = percent(point.value);
    dot.title = point.value + (point.n > 1 ? ": " + point.n + " participants" : "");
    strip.append(dot);
  }
  const counts = document.createElement("span");
  const target = type.target ? "[" + type.target[0] + ", " + type.target[1] + "]" : "none";
  const share = type.measured ? Math.round(100 * type.off / type.measured) : 0;
  counts.textContent = type.measured + " measured · target " + target + " · clipped " +
    type.clipped + " · outside the range " + type.outside + " · " + share + " % clipped or outside";
  line.append(name, strip, counts);
  return line;
}

function calibrationPanel() {
  const panel = document.getElementById("calibration");
  if (!panel) return;
  const calibration = snapshot.calibration || {types: [], amber: false};
  panel.classList.toggle("amber", calibration.amber);
  const empty = document.createElement("p");
  empty.textContent = "No capability measured yet.";
  const lines = calibration.types.map(calibrationType);
  if (lines.length && calibration.clipped_people) lines.push(clippedLine(calibration.clipped_people));
  document.getElementById("calibration-types").replaceChildren(...(lines.length ? lines : [empty]));
}

// What followed a clipped capability, as the protocol's clipped_capability declares it.
function clippedLine(clipped) {
  const line = document.createElement("p");
  line.id = "clipped-people";
  line.className = clipped.people ? "warning" : "";
  line.textContent = "Participants with a clipped capability: " + clipped.people +
    " (clipped_capability = " + clipped.consequence + ") · " + clipped.continued_as + ": " +
    clipped.continued + " · met the unmatched page: " + clipped.unmatched;
  return line;
}

// The database's disk: a full one holds every participant on "one moment" until space is
// freed (docs/study-day.md, storage faults); the warning comes before that.
function storageLine() {
  const line = document.getElementById("storage");
  const storage = snapshot.storage;
  if (!line || !storage) return;
  const disk = storage.disk;
  const free = (disk.free_bytes / 1048576).toFixed(0) + " MB free of " +
    (disk.total_bytes / 1048576).toFixed(0) + " MB (" + (100 * disk.free_fraction).toFixed(1) + " %)";
  if (!storage.available) {
    line.textContent = "The database cannot be written since " +
      new Date(storage.since * 1000).toLocaleTimeString() + " (" + storage.error + "; " +
      storage.failures + " writes failed). Participants wait on \"one moment\" and go on by " +
      "themselves once space is freed. Disk: " + free + ".";
  } else {
    line.textContent = "Database disk: " + free + (disk.low ? " — low: free space now, before " +
      "writes fail (warning below " + (disk.threshold_bytes / 1048576).toFixed(0) + " MB or " +
      (100 * disk.threshold_fraction).toFixed(0) + " %)." : ".");
  }
  line.className = !storage.available || disk.low ? "warning" : "hint";
}

// The server processes answering (a study run with --workers N has N): each one's age, the
// share of its time it held the database's write lock and, with several, waited for another's
// (docs/study-day.md, Serving).
function processesLine() {
  const line = document.getElementById("processes");
  const processes = snapshot.processes;
  if (!line || !processes || !processes.length) return;
  const now = Date.now() / 1000 + offset;
  const each = processes.map((p) => "pid " + p.pid + (p.this ? " (serving this page)" : "") + " up " +
    Math.round((now - p.started_at) / 60) + " min, held the write lock " +
    (100 * p.lock_held_share).toFixed(1) + " % of that" + (processes.length > 1 ?
      ", waited for another's " + (100 * p.lock_wait_share).toFixed(1) + " %" : ""));
  line.textContent = "Server: " + (processes.length === 1 ? "1 process" : processes.length + " processes") +
    " answering: " + each.join("; ") + ".";
}

// Real teams (docs/teams.md): who waits in the lobby, and every team as a row.
// How people came out of the lobby (lobby.outcome), in words.
const LOBBY_OUTCOMES = { team: "joined a team", timeout: "timed out", left: "left", withdrawn: "withdrew" };

function people(count) {
  return count + (count === 1 ? " person" : " people");
}

function lobbyLine() {
  const line = document.getElementById("lobby");
  const lobby = snapshot.lobby;
  if (!line || !lobby) return;
  const now = Date.now() / 1000 + offset;
  const waiting = lobby.waiting.map((w) => w.code + " " + Math.round(now - w.entered_at) + " s" +
    (w.individual_deadline ? " (own timer " + Math.max(0, Math.round(w.individual_deadline - now)) + " s)" : ""));
  const shared = lobby.shared_deadline ? " · shared timer " + Math.max(0, Math.round(lobby.shared_deadline - now)) + " s" : "";
  const outcomes = Object.entries(lobby.outcomes).map(([name, n]) => people(n) + " " + (LOBBY_OUTCOMES[name] || name))
    .join(", ") || "nobody yet";
  line.textContent = "Lobby: " + (waiting.length ? people(waiting.length) + " waiting: " + waiting.join(", ") : "nobody waiting") +
    shared + " · out of the lobby so far: " + outcomes;
}

function teamButton(id, action, label) {
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = label;
  button.addEventListener("click", async () => {
    const note = window.prompt(action + " every person of team " + id + " — note (optional):", "");
    if (note === null) return;
    const body = new URLSearchParams({action, note, csrf_token: window.CONSOLE.csrf});
    const reply = await fetch(window.CONSOLE.teamUrl + id, {
      method: "POST", body, headers: {"Accept": "application/json", "X-CSRF-Token": window.CONSOLE.csrf},
    });
    if (!reply.ok) window.alert(action + " failed: " + reply.status);
  });
  return button;
}

function teamRow(team) {
  const tr = document.createElement("tr");
  const seats = team.seats.map((s) => (s.seat + 1) + ": " + (s.code || s.kind) + " — " + s.state).join("; ");
  const place = team.round ? "S" + team.round.session + " · " + team.round.number + (team.round.running ? " (running)" : "") : "not started";
  const next = team.next_round_at ? Math.max(0, Math.round(team.next_round_at - (Date.now() / 1000 + offset))) + " s" : "";
  const actions = document.createElement("td");
  actions.className = "actions";
  actions.append(teamButton(team.id, "pause", "Pause team"), teamButton(team.id, "resume", "Resume team"),
    teamButton(team.id, "abort", "Abort team"));
  tr.append(cell(team.id, "code"), cell(team.formed_by + " · " + (team.live_type || "")),
            cell(seats), cell(place), cell(next), fairnessCell(team.fairness), actions);
  return tr;
}

function teamsPanel() {
  const body = document.querySelector("#team-rows tbody");
  if (!body || !snapshot.teams) return;
  body.replaceChildren(...snapshot.teams.map(teamRow));
  labelCells(body);
  lobbyLine();
  document.getElementById("finished-teams").textContent = "Teams that played to their end: " +
    (snapshot.finished_teams || 0) + " (not listed).";
}

// Participants whose study ended: counted in every snapshot, their rows read a page at a
// time (the latest to end first) when the experimenter opens the list, so the live view stays the
// size of the study now.
const finishedPanel = document.getElementById("finished");
const finished = {rows: [], more: false};

function finishedLine() {
  const counts = snapshot.finished || {count: 0, steps: {}};
  const steps = Object.entries(counts.steps).map(([step, n]) => step + " " + n).join(" · ");
  document.getElementById("finished-count").textContent = counts.count ?
    counts.count + " (" + steps + ")" : "none yet";
}

async function loadFinished(fromNewest) {
  const last = finished.rows[finished.rows.length - 1];
  const query = fromNewest || !last ? "" : "?before=" + last.id;
  const reply = await fetch(window.CONSOLE.finishedUrl + query, {headers: {"Accept": "application/json"}});
  if (!reply.ok) return;
  const page = await reply.json();
  finished.rows = fromNewest ? page.participants : finished.rows.concat(page.participants);
  finished.more = page.more;
  const body = document.querySelector("#finished-rows tbody");
  body.replaceChildren(...finished.rows.map(row));
  labelCells(body);
  document.getElementById("finished-more").hidden = !finished.more;
}

finishedPanel.addEventListener("toggle", () => { if (finishedPanel.open) loadFinished(true); });
document.getElementById("finished-more").addEventListener("click", () => loadFinished(false));

function draw() {
  table.replaceChildren(...snapshot.participants.map(row));
  labelCells(table);
  teamsPanel();
  fairnessPanel();
  finishedLine();
  targetLine();
  storageLine();
  processesLine();
  calibrationPanel();
  const unjoined = document.getElementById("unjoined");
  if (unjoined && snapshot.unjoined_messages !== null && snapshot.unjoined_messages !== undefined) {
    unjoined.textContent = "Messages from connections that never joined (counted, not stored): " + snapshot.unjoined_messages;
  }
}

function tick() {
  const cells = table.querySelectorAll("td.left");
  snapshot.participants.forEach((participant, index) => {
    if (cells[index]) cells[index].textContent = timeLeft(participant.current);
  });
  processesLine();
}

const socket = io("/console", {transports: ["websocket", "polling"]});
// A hidden tab asks for nothing: the server builds the view only while somebody can see it.
function looking() {
  socket.emit("looking", !document.hidden);
  status.textContent = document.hidden ? "paused while hidden" : "live";
}
socket.on("connect", looking);
document.addEventListener("visibilitychange", () => { if (socket.connected) looking(); });
socket.on("disconnect", () => { status.textContent = "reconnecting…"; });
socket.on("connect_error", () => { status.textContent = "not connected (log in again?)"; });
socket.on("live", (text, now) => {  // the snapshot as JSON text, and the server's clock
  snapshot = {...JSON.parse(text), now};
  offset = now - Date.now() / 1000;
  draw();
});
draw();
setInterval(tick, 500);
