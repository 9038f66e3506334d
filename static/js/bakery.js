// The participant's page: draws each step from the state the server sends. This entry
// module wires the parts: the connection (connection.js) hands each state to `render`,
// which picks the step's view from steps.js, rounds.js or stations.js, and shows an open
// round probe in it (probes.js).
import { connect, join, socket, state } from "./connection.js";
import { el, showMessage, stopTicking } from "./page.js";
import { withProbe } from "./probes.js";
import { guardRound, updateRound, viewReady, viewRound } from "./rounds.js";
import { receiveStation, updateWaiting, viewLobby, viewTeammate } from "./stations.js";
import {
  card, drawLeave, guardLeaving, viewConsent, viewDebrief, viewDone, viewEnded, viewHold, viewIntro,
  viewPreferences, viewQuestionnaire, viewThemes,
} from "./steps.js";
import { t } from "./texts.js";

const app = document.getElementById("app");
let renderedKey = null;  // what is on screen, so a push does not wipe a half-made cookie
const views = {
  consent: viewConsent, themes: viewThemes, preferences: viewPreferences,
  teammate: viewTeammate, debrief: viewDebrief, post: viewQuestionnaire, done: viewDone,
  declined: viewEnded, withdrawn: viewEnded, unmatched: viewEnded, dropped: viewEnded,
  lobby: viewLobby,
};

function render() {
  const progress = document.getElementById("progress");
  progress.style.width = (100 * state.progress.index / state.progress.total) + "%";
  const round = state.round;
  drawLeave();
  const running = round && round.running;
  const hold = state.hold === "paused" && running ? null : state.hold;
  const key = (hold || "") + "|" + state.step + "|" + (round ? (running ? "run" + round.id : "ready" + round.next) : "");
  if (key === renderedKey) { updateRound(); updateWaiting(); return; }
  renderedKey = key;
  stopTicking();
  let view = hold ? viewHold : views[state.step];
  if (!view && /^intro-/.test(state.step)) view = viewIntro;
  if (!view && /^questionnaire-/.test(state.step)) view = viewQuestionnaire;
  if (!view && round) view = round.running ? viewRound : viewReady;
  if (!view) view = () => card(state.page);
  app.replaceChildren(hold ? view() : withProbe(view()));
  window.scrollTo(0, 0);
}

// Another tab of this browser took the study over: this one offers to continue here.
function showElsewhere() {
  renderedKey = null;
  stopTicking();
  showMessage(t("other_tab_title"), t("other_tab_text"),
    el("button", { class: "button primary", type: "button", "data-action": "continue-here", onclick: join }, t("continue_here")));
}

connect(render, showElsewhere);
socket.on("stations", (push) => push.stations.forEach(receiveStation));
guardLeaving();
guardRound();
