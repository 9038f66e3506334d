// Rounds and the cookie: the page before a round, the round itself with its clock, and the
// participant's cookie (letters dragged onto it, squares iced), reported as it is decorated.
import { displaced, messageId, send, serverNow, socket, state } from "./connection.js";
import { button, el, icing, paragraphs, svgUse, tickEvery } from "./page.js";
import { counter, deliverOnce, drawStations, mates, plate, robotLane, teammateStation, updateWaiting } from "./stations.js";
import { sessionLabel } from "./steps.js";
import { t, tn } from "./texts.js";

function roundRunning() {
  const round = state && state.round;
  return Boolean(round && round.running && !displaced && serverNow() < round.deadline);
}

// Leaving the page while a round runs (reload, close, another address) asks first, and
// sends the cookie's waiting report before the page goes. A phone may end a tab it hid
// without a word to the page, so hiding it sends the waiting report too.
export function guardRound() {
  window.addEventListener("beforeunload", (event) => {
    if (!roundRunning()) return;
    event.preventDefault();
    event.returnValue = "";  // what older browsers need to ask
  });
  window.addEventListener("pagehide", sendHeldReport);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") sendHeldReport();
  });
}

function roundTitle(round, start) {
  const key = (start ? "start_" : "") + (round.session === 0 ? "practice_round" : "round");
  return t(key, { number: round.number || round.next, of: round.of });
}

export function viewReady() {
  const round = state.round;
  const last = state.last_round;
  const summary = last && last.session === round.session ? el("p", { class: "summary" },
    tn("summary", last.cookies, { number: last.number, cookies: last.cookies, cookie: t(last.task_name) }) +
    (last.teammate_cookies !== null ? t("summary_teammate", { teammate: last.teammate_cookies }) : t("summary_end"))) : null;
  const robot = state.robot ? t("robot_ready", { robot: state.robot.name }) : "";
  // A team's rounds start on the server's clock: no button, a countdown instead.
  const start = round.team
    ? el("p", { class: "team-waiting", id: "team-waiting", role: "status" }, "")
    : el("div", { class: "actions" }, button(roundTitle(round, true),
      () => send("start_round", { round: round.next }), "primary", { "data-action": "start-round" }));
  if (round.team) { tickEvery(250, updateWaiting); setTimeout(updateWaiting, 0); }
  return el("section", { class: "card bakery-ready", "data-step": state.step },
    sessionLabel(), el("h2", {}, state.page.title), paragraphs(state.page.text), summary,
    el("div", { class: "ready-row" }, state.robot ? svgUse("robot", "robot") : null, el("p", {}, robot)),
    counter(round), start);
}

export function viewRound() {
  const round = state.round;
  const mine = el("div", { class: "station mine" }, el("h3", {}, t("your_station")),
    el("div", { class: "kit-tag" }, svgUse("kit", "kit"), t("kit", { cookie: t(round.task_name) })),
    el("div", { class: "work", id: "work" }),
    el("div", { class: "finished" }, el("span", { id: "my-count" }, ""), el("div", { class: "plate", id: "my-plate" })));
  const others = mates(round);
  const stations = [mine, ...others.map(teammateStation)];
  const lane = robotLane(round, others);
  const view = el("section", { class: "bakery" + (others.length > 1 ? " three" : ""), "data-step": state.step, "data-round": round.id, "data-deadline": round.deadline },
    el("div", { class: "round-head" }, el("h2", {}, roundTitle(round)),
      el("div", { class: "timer", id: "timer" }, "")),
    lane, el("div", { class: "stations" }, stations));
  setTimeout(() => {
    drawWork(round, round.on_cookie);  // a page opened again mid-round: what was placed
    updateRound();
    if (others.length) deliverOnce(round);
  }, 0);
  tickEvery(100, tickDisplay);
  return view;
}

export function updateRound() {
  const round = state.round;
  if (!round || !round.running) return;
  const mine = document.getElementById("my-count");
  if (mine) mine.textContent = t("finished", { count: round.cookies });
  plate("my-plate", round.cookies, round.task_name);
  drawStations();
  tickDisplay();
}

function tickDisplay() {
  const round = state.round;
  if (!round || !round.running) return;
  const left = Math.max(0, round.deadline - serverNow());
  const node = document.getElementById("timer");
  if (node) {
    node.textContent = left > 0 ? t("seconds_left", { seconds: Math.ceil(left) }) : t("time_up");
    node.classList.toggle("hurry", left < 5);
  }
  const work = document.getElementById("work");
  if (work) work.classList.toggle("stopped", left <= 0);
  drawStations();
}

// The participant's cookie, with the elements `placed` already on it (the server's
// `round.on_cookie` when the page is opened again mid-round), or a fresh one.
function drawWork(round, placed) {
  const work = document.getElementById("work");
  if (!work) return;
  work.replaceChildren(round.target.kind === "letters" ? lettersCookie(round, placed) : squaresCookie(round, placed));
}

// Every element placed or taken off reports the cookie as now decorated. In practice
// (`round.progress_seconds` 0) each report goes at once, so the server measures the round
// continuously (docs/model.md). In a played round reports go at most every
// `progress_seconds`, the latest cookie when the interval ends, and at once in the round's
// last interval, so none falls after the deadline: they only draw teammates' stations and a
// reopened page's cookie. No retry and no message: a lost report only leaves the cookie on
// the one before it. A finished cookie still on the station reports nothing: the server
// would count it towards the next cookie.
let baking = false;
const reports = { round: null, sentAt: -Infinity, held: null, timer: null };

// The interval is timed on the page's own steady clock: the server's clock, as the page
// knows it, moves with each state's delivery.
function reportProgress(round, content) {
  if (baking) return;
  if (reports.round !== round.id) { dropHeldReport(); reports.round = round.id; reports.sentAt = -Infinity; }
  const every = round.progress_seconds || 0;
  const now = performance.now() / 1000;
  if (now - reports.sentAt >= every || round.deadline - serverNow() <= every) {
    dropHeldReport();
    emitProgress(round.id, content);
    return;
  }
  reports.held = content;
  if (reports.timer === null) reports.timer = setTimeout(sendHeldReport, (reports.sentAt + every - now) * 1000);
}

// The report waiting for its second to end, sent now (its second ended, or the page is left
// or hidden: a reload then redraws every element placed).
function sendHeldReport() {
  const held = reports.held;
  dropHeldReport();
  if (held !== null && roundRunning() && state.round.id === reports.round) emitProgress(reports.round, held);
}

function emitProgress(roundId, content) {
  reports.sentAt = performance.now() / 1000;
  socket.emit("progress", { msg_id: messageId(), round_id: roundId, content: content });
}

function dropHeldReport() {
  clearTimeout(reports.timer);
  reports.timer = null;
  reports.held = null;
}

function finishCookie(round, content) {
  dropHeldReport();  // the cookie itself says it all
  send("cookie", { round_id: round.id, content: content });
  baking = true;
  const work = document.getElementById("work");
  if (work) { work.classList.remove("baked"); void work.offsetWidth; work.classList.add("baked"); }
  setTimeout(() => { baking = false; drawWork(round); }, 250);
}

// Letters cookie: drag whole letters from the tray onto the cookie (pointer events, so a
// mouse, a finger and Playwright's mouse all drag the same way).
function lettersCookie(round, restored) {
  const target = round.target;
  const placed = Array.from(typeof restored === "string" ? restored : "").slice(0, target.letters.length);
  const words = target.text.split(/\s+/).filter(Boolean);
  const cookie = el("div", { class: "cookie round-cookie", style: icing(target), "data-target": target.text });
  const slots = el("div", { class: "slots" });
  cookie.append(el("div", { class: "sprinkles" }), slots);

  function drawSlots() {
    slots.replaceChildren();
    let index = 0;
    words.forEach((word) => {
      const group = el("span", { class: "word" });
      for (let k = 0; k < word.length; k += 1) {
        const at = index;
        const letter = placed[at];
        const wrong = letter && letter !== target.letters[at];
        group.append(el("span", {
          class: "slot" + (letter ? " filled" : "") + (wrong ? " wrong" : ""),
          title: word[k],
          onclick: () => { if (letter) { placed.splice(at); drawSlots(); reportProgress(round, placed.join("")); } },
        }, letter || ""));
        index += 1;
      }
      slots.append(group);
    });
    if (placed.length === target.letters.length && placed.join("") === target.letters) {
      finishCookie(round, placed.join(""));
    }
  }

  const tray = el("div", { class: "tray" }, target.tray.map((letter) =>
    el("span", { class: "tile", "data-letter": letter, onpointerdown: (e) => startDrag(e, letter) }, letter)));

  function startDrag(event, letter) {
    event.preventDefault();
    const ghost = el("span", { class: "tile ghost" }, letter);
    document.body.append(ghost);
    const move = (e) => { ghost.style.left = (e.clientX - 22) + "px"; ghost.style.top = (e.clientY - 22) + "px"; };
    move(event);
    const up = (e) => {
      document.removeEventListener("pointermove", move);
      document.removeEventListener("pointerup", up);
      ghost.remove();
      const box = cookie.getBoundingClientRect();
      const inside = e.clientX >= box.left && e.clientX <= box.right && e.clientY >= box.top && e.clientY <= box.bottom;
      if (inside && placed.length < target.letters.length && !document.getElementById("work").classList.contains("stopped")) {
        placed.push(letter);
        drawSlots();
        if (placed.join("") !== target.letters) reportProgress(round, placed.join(""));
      }
    };
    document.addEventListener("pointermove", move);
    document.addEventListener("pointerup", up);
  }

  drawSlots();
  return el("div", { class: "letters-work" }, cookie,
    el("p", { class: "hint" }, t("letters_hint", { text: target.text })), tray);
}

// Squares cookie: click boxes of the grid to draw the letters shown faintly.
function squaresCookie(round, restored) {
  const target = round.target;
  const wanted = new Set(target.cells);
  const filled = new Set(Array.isArray(restored) ? restored : []);
  const grid = el("div", { class: "grid", style: "grid-template-columns: repeat(" + target.cols + ", 1fr)" });
  for (let cell = 0; cell < target.rows * target.cols; cell += 1) {
    const box = el("button", { type: "button", class: "box" + (wanted.has(cell) ? " guide" : "") +
      (filled.has(cell) ? " iced" : "") + (filled.has(cell) && !wanted.has(cell) ? " wrong" : ""), "data-cell": cell });
    box.addEventListener("click", () => {
      if (document.getElementById("work").classList.contains("stopped")) return;
      if (filled.has(cell)) filled.delete(cell); else filled.add(cell);
      box.classList.toggle("iced", filled.has(cell));
      box.classList.toggle("wrong", filled.has(cell) && !wanted.has(cell));
      if (filled.size === wanted.size && [...filled].every((c) => wanted.has(c))) {
        finishCookie(round, [...filled].sort((a, b) => a - b));
      } else {
        reportProgress(round, [...filled].sort((a, b) => a - b));
      }
    });
    grid.append(box);
  }
  return el("div", { class: "squares-work" },
    el("div", { class: "cookie square-cookie", style: icing(target), "data-target": target.text }, grid),
    el("p", { class: "hint" }, t("squares_hint", { text: target.text })));
}
