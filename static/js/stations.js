// Team stations: the teammates' stations beside the participant's (an agent's cookie drawn
// at the model's pace, a real teammate's as they place it), the robot that hands out the
// kits, a real team's seats and the lobby where a team is formed.
import { code, serverNow, state, submit } from "./connection.js";
import { button, el, icing, svgUse, tickEvery } from "./page.js";
import { card } from "./steps.js";
import { t, tn } from "./texts.js";

const delivered = deliveredRounds();  // rounds whose kit hand-out this tab already showed

// A real teammate placed an element or finished a cookie (docs/teams.md): their station
// is redrawn as the push arrives, at most a second later, the changes of that second in
// one push; the next state corrects it if a push was lost.
export function receiveStation(update) {
  const round = state && state.round;
  if (!round || !round.running || !round.stations) return;
  const station = round.stations.find((s) => s.seat === update.seat && s.team_round === update.team_round);
  if (!station || station.kind !== "person") return;
  Object.assign(station, { cookies: update.cookies, placed: update.placed, elements: update.elements });
  drawStations();
}

// The agent teammate of an individual study is presented as a person only where the
// protocol declares it is until the debrief (agent_teammate = "concealed").
function concealed() {
  return state.agent_teammate === "concealed";
}

export function viewTeammate() {
  // A real team's page (docs/teams.md) says who the teammates are in its own words, and
  // lists every seat as the rounds will name it: a person or an agent.
  return card(state.page, state.team ? el("div", { class: "team-seats" },
    el("h3", {}, t("team_seats")), el("ul", { id: "team-seats" }, seatList())) :
    el("div", { class: "teammate-hello" }, svgUse(concealed() ? "baker" : "agent", "baker"), el("p", {}, t("teammate_hello"))),
    el("div", { class: "actions" }, button(t("continue"), () => submit(), "primary", { "data-action": "continue" })));
}

function seatList() {
  return state.team.seats.map((seat) => {
    const name = seat.you ? t("team_you") : t(seat.kind === "agent" ? "station_agent"
      : seat.dropped ? "station_taken_over" : "station_person", { seat: seat.seat + 1 });
    return el("li", { class: "team-seat", "data-kind": seat.kind, "data-you": seat.you ? "1" : "0" }, name);
  });
}

// The lobby: who is here, when the wait ends, and a way out after a while.
export function viewLobby() {
  const lobby = state.lobby;
  const view = card(state.page,
    el("div", { class: "lobby" },
      el("div", { class: "waiting", "aria-hidden": "true" }, el("span", {}), el("span", {}), el("span", {})),
      el("p", { class: "lobby-count", id: "lobby-count" }, ""),
      el("p", { class: "lobby-missing", id: "lobby-missing" }, ""),
      el("p", { class: "lobby-others", id: "lobby-others" }, ""),
      el("p", { class: "lobby-countdown", id: "lobby-countdown" }, ""),
      el("p", { class: "lobby-timeout" }, t(lobby.on_timeout === "agents" ? "lobby_timeout_agents" : "lobby_timeout_unmatched"))),
    el("div", { class: "actions", id: "lobby-leave", style: "display: none" },
      button(t("lobby_leave"), () => submit({ leave: true }), "secondary", { "data-action": "lobby-leave" })));
  tickEvery(250, updateWaiting);
  setTimeout(updateWaiting, 0);
  return view;
}

// What a waiting page shows that changes without a new view: the lobby's count and
// countdown, a team's "next round in" and "waiting for".
export function updateWaiting() {
  if (!state) return;
  const lobby = state.step === "lobby" ? state.lobby : null;
  if (lobby) {
    const count = document.getElementById("lobby-count");
    if (count) count.textContent = tn("lobby_waiting", lobby.waiting, { waiting: lobby.waiting, needed: lobby.needed });
    // what the wait is for: more people, by traits people who fit; and who else waits
    const missing = document.getElementById("lobby-missing");
    if (missing) {
      missing.textContent = lobby.formation === "traits"
        ? tn("lobby_missing_traits", lobby.missing, { missing: lobby.missing })
        : tn("lobby_missing", lobby.missing, { missing: lobby.missing });
    }
    const others = document.getElementById("lobby-others");
    if (others) others.textContent = lobby.others ? tn("lobby_others", lobby.others, { others: lobby.others }) : "";
    const countdown = document.getElementById("lobby-countdown");
    if (countdown) {
      countdown.textContent = lobby.deadline ? t("lobby_countdown", { seconds: Math.max(0, Math.ceil(lobby.deadline - serverNow())) }) : "";
    }
    const leave = document.getElementById("lobby-leave");
    if (leave) leave.style.display = serverNow() < lobby.leave_at ? "none" : "";
  }
  const seats = document.getElementById("team-seats");
  if (seats && state.team) seats.replaceChildren(...seatList());  // a seat taken over meanwhile
  const round = state.round;
  const note = document.getElementById("team-waiting");
  if (round && round.team && note) {
    note.textContent = round.team.next_at
      ? t("team_next_round", { seconds: Math.max(0, Math.ceil(round.team.next_at - serverNow())) })
      : tn("team_waiting", round.team.waiting_for, { count: round.team.waiting_for });
  }
}

export function counter(round) {
  const station = round.station;
  if (!station) return null;
  return el("div", { class: "fetch-station" }, el("span", { class: "label" }, t("kits_waiting")),
    el("span", { class: "kits squares" }, svgUse("kit", "kit"), t("kits_left", { cookie: t("squares"), count: station[0] })),
    el("span", { class: "kits letters" }, svgUse("kit", "kit"), t("kits_left", { cookie: t("letters"), count: station[1] })));
}

// The robot's lane above the stations when others share the round: the kits waiting at its
// station and the robot carrying each station's kit.
export function robotLane(round, others) {
  return others.length ? el("div", { class: "robot-lane" }, counter(round),
    el("div", { class: "robot-runner", id: "runner" },
      el("div", { class: "carry" }, el("span", { class: "carried mine " + round.task_name }, svgUse("kit", "kit"), t("carried_yours")),
        others.map((mate) => el("span", { class: "carried theirs " + mate.task_name }, svgUse("kit", "kit"), t("carried_teammates")))),
      svgUse("robot", "robot"), el("span", { class: "nameplate" }, t("robot_name", { robot: state.robot.name })))) : null;
}

// The robot hands out a round's kits once in this tab: a refresh mid-round shows them handed out.
export function deliverOnce(round) {
  if (delivered.has(round.id)) return;
  delivered.add(round.id);
  rememberDelivered();
  deliver();
}

function deliver() {
  const runner = document.getElementById("runner");
  if (runner) { runner.classList.remove("delivering"); void runner.offsetWidth; runner.classList.add("delivering"); }
}

export function plate(id, count, kind) {
  const node = document.getElementById(id);
  if (!node) return;
  node.replaceChildren(...Array.from({ length: count }, () => el("span", { class: "done-cookie " + kind })));
}

// The other stations of a round: the agent teammate of an individual study, or every
// other seat of a real team (docs/teams.md), each with the id its elements go by.
export function mates(round) {
  if (round.teammate) return [Object.assign({ key: "teammate", kind: "agent", title: t("teammate_station"), room: concealed() }, round.teammate)];
  return (round.stations || []).map((station) => Object.assign({
    key: "seat" + station.seat,
    title: t(station.taken_over ? "station_taken_over" : station.kind === "agent" ? "station_agent" : "station_person", { seat: station.seat + 1 }),
  }, station));
}

export function drawStations() {
  const round = state && state.round;
  if (!round || !round.running) return;
  mates(round).forEach((mate) => {
    const station = document.getElementById(mate.key);
    if (!station) return;
    const done = teammateDone(round, mate);
    if (station.dataset.cookies !== String(done) || !station.dataset.drawn) {
      station.dataset.cookies = done;
      station.dataset.drawn = "1";
      document.getElementById(mate.key + "-count").textContent = t("finished", { count: done });
      plate(mate.key + "-plate", done, mate.task_name);
    }
    if (mate.kind === "agent") animateTeammate(round, mate); else drawPerson(mate);
  });
}

// A real teammate's cookie in progress: as many of its elements as they placed.
function drawPerson(mate) {
  const cookie = document.getElementById(mate.key + "-cookie");
  if (!cookie) return;
  const key = mate.cookies + ":" + mate.placed;
  if (shown.get(mate.key) === key) return;
  const fresh = !(shown.get(mate.key) || "").startsWith(mate.cookies + ":");
  shown.set(mate.key, key);
  const steps = elementsOf(mate.target).slice(0, mate.placed).map((element) => ({ kind: "place", element: element }));
  drawMiniCookie(cookie, mate.target, steps, fresh);
  const baker = document.getElementById(mate.key + "-baker");
  if (baker) baker.className = "teammate-baker working";
}

// --- the teammate's station -------------------------------------------------------------
// The server decides when each of the teammate's cookies is finished (round.teammate.times,
// the decorator model) and how many are done; the page only fills in the work between two
// finishes: the elements of the cookie in progress land one by one at a human pace, with
// uneven gaps, a hesitation now and then and the occasional wrong element taken off again.
// The plan of a cookie is seeded by round and cookie, so a refresh shows the same work.

// Per station: cookie and number of steps drawn, so a tick redraws only changes.
const shown = new Map();

// A station's finished cookies: an agent's, those of the server's schedule that are due
// by now (never fewer than the server counted when it sent the state); a person's, as
// the server last said.
function teammateDone(round, mate) {
  if (mate.kind !== "agent") return mate.cookies;
  const now = Math.min(serverNow(), round.deadline);
  return Math.max(mate.cookies, mate.times.filter((t) => t <= now).length);
}

function deliveredRounds() {
  try { return new Set(JSON.parse(sessionStorage.getItem("delivered:" + code) || "[]")); } catch (e) { return new Set(); }
}

function rememberDelivered() {
  try { sessionStorage.setItem("delivered:" + code, JSON.stringify([...delivered].slice(-20))); } catch (e) { /* private mode */ }
}

// An agent looks like an agent, never like a person, unless the protocol conceals the agent
// teammate of an individual study (mate.room) until the debrief.
function stationFigure(mate) {
  return mate.kind === "agent" && !mate.room ? "agent" : "baker";
}

export function teammateStation(mate) {
  shown.delete(mate.key);
  return el("div", { class: "station theirs", id: mate.key, "data-kind": mate.kind },
    el("h3", {}, mate.title + " ", mate.room ? el("small", {}, t("next_room")) : null),
    el("div", { class: "teammate-work" },
      el("div", { class: "teammate-baker", id: mate.key + "-baker" }, svgUse(stationFigure(mate), "baker")),
      el("div", { class: "mini-cookie " + mate.task_name, id: mate.key + "-cookie", style: icing(mate.target) },
        miniCookie(mate.target)),
      el("div", { class: "teammate-side" },
        el("div", { class: "kit-tag" }, svgUse("kit", "kit"), t("kit", { cookie: t(mate.task_name) })),
        el("div", { class: "finished" }, el("span", { id: mate.key + "-count" }, ""), el("div", { class: "plate", id: mate.key + "-plate" })))));
}

function miniCookie(target) {
  if (target.kind === "letters") {
    let index = 0;
    return el("div", { class: "mini-slots" }, target.text.split(/\s+/).filter(Boolean).map((word) =>
      el("span", { class: "mini-word" }, Array.from(word, () => el("span", { class: "mini-slot", "data-i": index++ })))));
  }
  const grid = el("div", { class: "mini-grid", style: "grid-template-columns: repeat(" + target.cols + ", 1fr)" });
  const wanted = new Set(target.cells);
  for (let cell = 0; cell < target.rows * target.cols; cell += 1) {
    grid.append(el("span", { class: "mini-box" + (wanted.has(cell) ? " guide" : ""), "data-cell": cell }));
  }
  return grid;
}

function seeded(seed) {  // mulberry32: a small, fast generator with a 32-bit seed
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function elementsOf(target) {
  if (target.kind === "letters") return Array.from(target.letters, (letter, i) => ({ i: i, value: letter }));
  const glyph = (cell) => Math.floor((cell % target.cols) / 4);
  return target.cells.slice().sort((a, b) => glyph(a) - glyph(b) || a - b).map((cell) => ({ i: cell, value: cell }));
}

function wrongElement(target, element, rng) {
  if (target.kind === "letters") {
    const others = target.tray.filter((letter) => letter !== element.value);
    return { i: element.i, value: others[Math.floor(rng() * others.length)] };
  }
  const wanted = new Set(target.cells);
  const near = [-1, 1, -target.cols, target.cols].map((d) => element.i + d)
    .filter((cell) => cell >= 0 && cell < target.rows * target.cols && !wanted.has(cell));
  return near.length ? { i: near[Math.floor(rng() * near.length)], value: null } : null;
}

// One cookie's steps between `start` and `end`: weights in units of an ordinary step,
// lognormal spread, hesitations (2.5-4.5 steps) and corrections (a wrong element placed,
// then taken off), scaled so that the last element lands just before `end`.
function cookiePlan(target, seed, start, end) {
  const rng = seeded(seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rng())) * Math.cos(2 * Math.PI * rng());
  const steps = [{ kind: "begin", weight: 1 + rng() }];
  elementsOf(target).forEach((element) => {
    if (rng() < (target.kind === "letters" ? 0.07 : 0.04)) {
      const wrong = wrongElement(target, element, rng);
      if (wrong) {
        steps.push({ kind: "wrong", element: wrong, weight: Math.exp(0.35 * normal()) });
        steps.push({ kind: "undo", element: wrong, weight: 0.6 + 0.6 * rng() });
      }
    }
    const hesitation = rng() < 0.1 ? 2.5 + 2 * rng() : 1;
    steps.push({ kind: "place", element: element, weight: hesitation * Math.exp(0.35 * normal()) });
  });
  steps.push({ kind: "check", weight: 0.4 });
  const total = steps.reduce((sum, step) => sum + step.weight, 0);
  let clock = 0;
  steps.forEach((step) => { clock += step.weight; step.at = start + (end - start) * clock / total; step.long = step.weight > 2.2; });
  return steps;
}

// Start and end of the teammate's cookie number `index` (0-based) in this round. The first
// one may have been begun before the round (the model's renewal process runs on); one the
// model does not finish in time ends after the deadline, so it is never shown complete.
function cookieSpan(round, mate, index, rng) {
  const times = mate.times;
  const typical = mate.cookie_seconds * (0.8 + 0.4 * rng());
  if (index >= times.length) {
    const start = index === 0 ? round.started_at : times[index - 1];
    return [start, Math.max(start + typical, round.deadline + 1)];
  }
  return [index === 0 ? Math.min(round.started_at, times[0] - typical) : times[index - 1], times[index]];
}

function animateTeammate(round, mate) {
  const cookie = document.getElementById(mate.key + "-cookie");
  if (!cookie) return;
  const index = teammateDone(round, mate);
  const seed = round.id * 7919 + index * 104729 + 17 + (mate.seat || 0) * 31;
  const [start, end] = cookieSpan(round, mate, index, seeded(seed + 1));
  const plan = cookiePlan(mate.target, seed, start, end);
  const now = Math.min(serverNow(), round.deadline);
  const done = plan.filter((step) => step.at <= now).length;
  const baker = document.getElementById(mate.key + "-baker");
  const next = plan[done];
  if (baker) baker.className = "teammate-baker" + (next && next.long ? " pondering" : " working");
  const key = round.id + ":" + index + ":" + done;
  const before = shown.get(mate.key) || "";
  if (key === before) return;
  shown.set(mate.key, key);
  drawMiniCookie(cookie, mate.target, plan.slice(0, done), !before.startsWith(round.id + ":" + index + ":"));
}

function drawMiniCookie(cookie, target, steps, fresh) {
  const placed = new Map();  // element position -> [value, wrong]
  steps.forEach((step) => {
    if (step.kind === "place") placed.set(step.element.i, [step.element.value, false]);
    else if (step.kind === "wrong") placed.set(step.element.i, [step.element.value, true]);
    else if (step.kind === "undo") placed.delete(step.element.i);
  });
  const last = steps.length ? steps[steps.length - 1] : null;
  const newest = last && last.element && (last.kind === "place" || last.kind === "wrong") ? last.element.i : null;
  const letters = target.kind === "letters";
  cookie.querySelectorAll(letters ? ".mini-slot" : ".mini-box").forEach((node) => {
    const at = Number(letters ? node.dataset.i : node.dataset.cell);
    const mark = placed.get(at);
    if (letters) node.textContent = mark ? mark[0] : "";
    node.classList.toggle("on", Boolean(mark));
    node.classList.toggle("wrong", Boolean(mark && mark[1]));
    node.classList.toggle("landing", at === newest);
  });
  cookie.dataset.placed = [...placed.values()].filter((mark) => !mark[1]).length;
  if (fresh) { cookie.classList.remove("fresh"); void cookie.offsetWidth; cookie.classList.add("fresh"); }
}
