// Round probes: a one-tap question right after a round's result (docs/protocol.md,
// [[probes]]). The state carries the open probes with their deadlines; the page shows the
// first, tells the server it was shown, and holds the start button until it is answered or
// its deadline passes. The server keeps the first answer and marks the rest missed.
import { send, serverNow, state } from "./connection.js";
import { el } from "./page.js";

const told = new Set();  // probes whose showing this page reported
let closing = null;      // the timer that redraws once the probe on screen closes

function open() {
  const round = state.round;
  if (round && round.running) return null;  // a team's next round began: the round first
  return (state.probes || []).find((probe) => probe.deadline > serverNow()) || null;
}

// The view with the open probe in it: before the start button, which it hides, or at the
// top of a page without one (the questionnaire after a session's last round). Answered,
// refused or past its deadline, the probe leaves in place: nothing else is redrawn, so a
// questionnaire begun meanwhile keeps its answers.
export function withProbe(view) {
  clearTimeout(closing);
  const probe = open();
  if (!probe) return view;
  const card = probeCard(probe);
  const ready = view.classList.contains("bakery-ready");  // between rounds
  const actions = ready ? view.querySelector(".actions, .team-waiting") : null;
  if (actions) actions.before(card); else view.prepend(card);
  const start = ready ? view.querySelector(".actions") : null;
  if (start) start.style.display = "none";  // [hidden] would lose to the stylesheet's display
  card.close = () => { clearTimeout(closing); card.remove(); if (start) start.style.display = ""; };
  closing = setTimeout(card.close, Math.max(0, (probe.deadline - serverNow()) * 1000));
  const key = probe.round_id + ":" + probe.id;
  if (!told.has(key)) {
    told.add(key);
    send("probe", { round_id: probe.round_id, probe: probe.id, value: null });
  }
  return view;
}

// Anchors spread over the points, first to last, as the questionnaires' scales show them.
function probeCard(probe) {
  const points = [];
  for (let value = 1; value <= probe.points; value++) {
    points.push(el("button", {
      class: "probe-point", type: "button", "data-value": value,
      onclick: (event) => answer(probe, value, event.currentTarget),
    }, String(value)));
  }
  return el("div", { class: "probe", "data-probe": probe.id, "data-round": probe.round, role: "group", "aria-label": probe.text },
    el("p", { class: "probe-text" }, probe.text),
    el("div", { class: "probe-points" }, points),
    el("div", { class: "probe-anchors" }, probe.anchors.map((anchor) => el("span", {}, anchor))));
}

// One tap answers: the buttons wait for the server, and the probe leaves once it answered
// (a late or second answer is refused quietly and leaves it too).
async function answer(probe, value, node) {
  const card = node.closest(".probe");
  card.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  node.classList.add("chosen");
  const reply = await send("probe", { round_id: probe.round_id, probe: probe.id, value });
  if (reply) card.close();
}
