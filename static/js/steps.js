// Steps' pages: consent, themes, ratings, the robot's introduction, questionnaires,
// debrief, the end pages and the experimenter's hold, each drawn from the server's state;
// and leaving: "stop and withdraw" after consent, the Back button kept inside the study.
import { code, displaced, send, state, submit } from "./connection.js";
import { button, el, icing, paragraphs, svgUse, toast } from "./page.js";
import { t, tn } from "./texts.js";

const REDIRECT_SECONDS = 10;
const ENDS = ["done", "declined", "withdrawn", "unmatched", "dropped"];  // steps after the study

// A step's card: its title and text, then what the step asks.
export function card(page, ...children) {
  return el("section", { class: "card", "data-step": state.step },
    el("h2", {}, page.title), paragraphs(page.text), ...children);
}

export function viewConsent() {
  return card(state.page, el("div", { class: "actions" },
    button(t("agree"), () => submit({ agree: true }), "primary", { "data-action": "agree" }),
    button(t("decline"), () => submit({ agree: false }), "secondary", { "data-action": "decline" })));
}

function themeCard(theme) {
  return el("article", { class: "theme", style: icing(theme) },
    el("div", { class: "theme-cookie" }, el("span", {}, theme.text)),
    el("h3", {}, theme.name),
    el("p", {}, theme.description),
    // Said only when every participant gets the same themes: assigned by rating, the
    // cookie a theme goes on is decided after this page.
    theme.cookie ? el("p", { class: "theme-cookie-type" }, t("theme_cookie", { cookie: t(theme.cookie) })) : null);
}

export function viewThemes() {
  return card(state.page, el("div", { class: "themes" }, state.page.themes.map(themeCard)),
    el("div", { class: "actions" }, button(t("continue"), () => submit(), "primary", { "data-action": "continue" })));
}

function likert(name, scale, onchange) {
  const anchors = scale.anchors;
  const options = [];
  for (let value = 1; value <= scale.points; value += 1) {
    const input = el("input", { type: "radio", name: name, value: value, onchange: () => onchange(value) });
    options.push(el("label", { class: "likert-point" }, input, el("span", { class: "dot" }, value)));
  }
  const labels = el("div", { class: "anchors" }, anchors.map((a) => el("span", {}, a)));
  return el("div", { class: "likert", "data-item": name }, el("div", { class: "points" }, options), labels);
}

export function viewPreferences() {
  const page = state.page;
  const ratings = {};
  const go = button(t("continue"), () => submit({ ratings: ratings }), "primary", { disabled: true, "data-action": "continue" });
  const rows = page.themes.map((theme) => el("div", { class: "question" },
    el("div", { class: "question-theme" }, themeCard(theme)),
    el("div", { class: "question-body" }, el("p", {}, page.prompt),
      likert(theme.id, page.scale, (v) => {
        ratings[theme.id] = v;
        go.disabled = Object.keys(ratings).length < page.themes.length;
      }))));
  return el("section", { class: "card wide", "data-step": state.step }, el("h2", {}, page.title), rows,
    el("div", { class: "actions" }, go));
}

// "Session 2 of 3" above the pages of a collaborative session (state.session).
export function sessionLabel() {
  const session = state.session;
  return session ? el("p", { class: "session-label", "data-session": session.number },
    t("session_of", { number: session.number, of: session.of })) : null;
}

export function viewIntro() {
  const page = state.page;
  const bubble = state.page.transparency || null;
  return el("section", { class: "card robot-intro", "data-step": state.step },
    el("div", { class: "robot-portrait" }, svgUse("robot", "robot big"), el("div", { class: "nameplate" }, t("robot_name", { robot: page.robot }))),
    el("div", {}, sessionLabel(), el("h2", {}, page.title), paragraphs(page.text),
      bubble ? el("blockquote", { class: "bubble" }, bubble) : null,
      el("div", { class: "actions" }, button(t("start_session"), () => submit(), "primary", { "data-action": "continue" }))));
}

export function viewQuestionnaire() {
  const page = state.page;
  const answers = {};
  const form = page.items.map((item, index) => el("div", { class: "question-item", "data-item": item.id,
    oninput: (e) => e.currentTarget.classList.remove("missing"), onchange: (e) => e.currentTarget.classList.remove("missing") },
    el("p", { class: "item-text" }, (index + 1) + ". " + item.text), questionInput(item, answers),
    el("p", { class: "missing-note" }, t("missing_note"))));
  const go = button(t("submit"), () => {
    const missing = page.items.filter((item) => item.required && (answers[item.id] === undefined || answers[item.id] === ""));
    form.forEach((node, index) => node.classList.toggle("missing", missing.includes(page.items[index])));
    if (missing.length) {
      form[page.items.indexOf(missing[0])].scrollIntoView({ behavior: "smooth", block: "center" });
      toast(tn("missing", missing.length, { count: missing.length }));
      return null;
    }
    return submit({ answers: answers });
  }, "primary", { "data-action": "submit" });
  return el("section", { class: "card wide", "data-step": state.step }, sessionLabel(), el("h2", {}, page.title),
    paragraphs(page.text), form, el("div", { class: "actions" }, go));
}

function questionInput(item, answers) {
  if (item.kind === "likert") return likert(item.id, item, (v) => { answers[item.id] = v; });
  if (item.kind === "rank") return rankInput(item, answers);
  if (item.kind === "pairwise") return pairsInput(item, answers);
  if (item.kind === "choice") {
    return el("div", { class: "choices" }, item.options.map((option) => el("label", { class: "choice" },
      el("input", { type: "radio", name: item.id, value: option, onchange: () => { answers[item.id] = option; } }),
      el("span", {}, option))));
  }
  if (item.kind === "number") {
    return el("input", { type: "number", class: "number", min: item.min, max: item.max, name: item.id,
      oninput: (e) => { answers[item.id] = e.target.value === "" ? "" : Number(e.target.value); } });
  }
  return el("textarea", { name: item.id, rows: 3, maxlength: item.max_length,
    oninput: (e) => { answers[item.id] = e.target.value; } });
}

// A rank over the robots met (docs/protocol.md): tapping a robot gives it the next place,
// tapping it again takes it back (the places after it move up). The robots stay where
// they are, so nothing moves under a finger; the answer is complete once all are placed.
function rankInput(item, answers) {
  const order = [];
  const buttons = item.robots.map((robot) => el("button", {
    class: "rank-robot", type: "button", "data-robot": robot.id, "aria-pressed": "false",
    onclick: (event) => {
      const at = order.indexOf(robot.id);
      if (at >= 0) order.splice(at, 1); else order.push(robot.id);
      answers[item.id] = order.length === item.robots.length ? order.slice() : undefined;
      buttons.forEach((node) => {
        const place = order.indexOf(node.dataset.robot);
        node.setAttribute("aria-pressed", place >= 0 ? "true" : "false");
        node.querySelector(".rank-place").textContent = place >= 0 ? String(place + 1) : "";
      });
      event.currentTarget.closest(".question-item").classList.remove("missing");
    } }, el("span", { class: "rank-place", "aria-hidden": "true" }, ""), svgUse("robot", "robot"),
    t("robot_name", { robot: robot.name })));
  return el("div", { class: "rank", "data-item": item.id },
    el("p", { class: "rank-hint" }, t("rank_hint")),
    el("ol", { class: "rank-robots" }, buttons.map((node) => el("li", {}, node))));
}

// Every two robots met, each pair a row under its caption (the two robots' names): one of
// the two, or the item's tie ("No difference").
function pairsInput(item, answers) {
  const chosen = {};
  const pick = (key, value) => {
    chosen[key] = value;
    answers[item.id] = Object.keys(chosen).length === item.pairs.length ? Object.assign({}, chosen) : undefined;
  };
  return el("div", { class: "pairs", "data-item": item.id }, item.pairs.map((pair) => {
    const options = [[pair.a.id, t("robot_name", { robot: pair.a.name })], [pair.b.id, t("robot_name", { robot: pair.b.name })]];
    if (item.tie) options.push(["=", item.tie]);
    return el("fieldset", { class: "pair", "data-pair": pair.key },
      el("legend", { class: "pair-caption" }, pair.caption),
      el("div", { class: "choices" }, options.map(([value, label]) => el("label", { class: "choice" },
        el("input", { type: "radio", name: item.id + ":" + pair.key, value: value, onchange: () => pick(pair.key, value) }),
        el("span", {}, label)))));
  }));
}

export function viewDebrief() {
  return card(state.page, el("div", { class: "actions" },
    button(t("keep_data"), () => submit({ consent: true }), "primary", { "data-action": "keep" }),
    button(t("delete_data"), () => submit({ consent: false }), "secondary", { "data-action": "withdraw" })));
}

export function viewDone() {
  const token = state.withdraw_token;
  const link = token ? location.origin + "/withdraw/" + token : null;
  return card(state.page, link ? el("div", { class: "withdraw-later" },
    el("h3", {}, t("withdraw_later_title")),
    el("p", {}, t("withdraw_later_text")),
    el("p", { class: "private-link" }, el("a", { href: link, "data-action": "withdraw-later" }, link))) : null,
    completion());
}

// The recruitment platform's completion link for this end (state.end, from the protocol's
// [recruitment]; docs/recruitment.md); the page goes there by itself after a few
// seconds unless the participant chooses to stay (to keep the private link, say).
function completion() {
  const end = state.end || {};
  if (!end.url) return endCode(end);
  const completionUrl = end.url;
  let left = REDIRECT_SECONDS;
  const note = el("span", { class: "countdown" }, t("taking_you_back", { seconds: left }));
  const stay = el("button", { class: "button secondary", type: "button", "data-action": "stay" }, t("stay"));
  const countdown = setInterval(() => {
    left -= 1;
    note.textContent = t("taking_you_back", { seconds: left });
    if (left <= 0) { clearInterval(countdown); location.assign(completionUrl); }
  }, 1000);
  stay.addEventListener("click", () => { clearInterval(countdown); note.remove(); stay.remove(); });
  return el("div", { class: "completion" }, endCode(end),
    el("p", {}, el("a", { class: "button primary", href: completionUrl, "data-action": "complete" }, t("complete"))),
    el("p", {}, note, " ", stay));
}

// The other ends (declined, withdrawn, the lobby's timeout, not matched, dropped, ended
// by the experimenter): the code and the link back to the platform the protocol gives.
function returnLink() {
  const end = state.end || {};
  return [endCode(end),
    end.url ? el("p", {}, el("a", { class: "button primary", href: end.url, "data-action": "return" }, t("return"))) : null];
}

// A completion code to copy into the platform, when the protocol gives this end one: the
// text around it as the protocol words it, the code itself set apart to select and copy.
function endCode(end) {
  if (!end.code) return null;
  const [before, after] = t("completion_code", { code: "\u0000" }).split("\u0000");
  return el("p", { class: "completion-code", "data-outcome": end.outcome },
    before, el("strong", { class: "code" }, end.code), after);
}

export function viewEnded() { return card(state.page, returnLink()); }

// The experimenter's hold: paused (this page continues by itself when resumed) or
// aborted (the end). Withdrawing stays possible from both.
export function viewHold() {
  const page = state.hold_page;
  return el("section", { class: "card hold", "data-step": state.step, "data-hold": state.hold },
    state.hold === "paused" ? el("div", { class: "waiting", "aria-hidden": "true" }, el("span", {}), el("span", {}), el("span", {})) : null,
    el("h2", {}, page.title), paragraphs(page.text), state.hold === "aborted" ? returnLink() : null);
}

// --- leaving: "stop and withdraw" on every page after consent ---------------------------

export function drawLeave() {
  const leave = document.getElementById("leave");
  const open = state.step !== "consent" && !ENDS.includes(state.step);
  leave.hidden = !open;
  if (open && !leave.firstChild) {
    leave.append(el("button", { class: "leave-link", type: "button", "data-action": "leave", onclick: confirmLeave },
      t("leave")));
  }
  if (!open) closeConfirm();
}

function confirmLeave() {
  const box = document.getElementById("confirm");
  const stay = button(t("keep_going"), () => { closeConfirm(); return null; }, "primary", { "data-action": "withdraw-cancel" });
  box.replaceChildren(el("div", { class: "confirm-card", role: "dialog", "aria-modal": "true", "aria-labelledby": "confirm-title" },
    el("h2", { id: "confirm-title" }, t("leave_title")),
    paragraphs(t("leave_text")),
    el("div", { class: "actions" }, stay,
      button(t("leave_confirm"), () => send("withdraw", {}), "secondary", { "data-action": "withdraw-confirm" }))));
  box.hidden = false;
  stay.focus();
}

function closeConfirm() {
  const box = document.getElementById("confirm");
  box.hidden = true;
  box.replaceChildren();
}

// --- staying in the study: the Back button, and leaving mid-round -----------------------
// The whole study is this one page, so the browser's Back would leave it. While the study
// is open the page keeps a history entry of its own on top, pushed at the participant's
// next click or key (browsers skip, on Back, entries a page adds without one): Back takes
// that entry off, the participant stays where they were and is told how to stop. After
// the study ended Back leaves as usual. Leaving the page while a round runs (reload,
// close, another address, a second Back before the next click) asks first.
let historyGuarded = false;

function studyOpen() {
  return Boolean(state) && !displaced && state.step !== "consent" &&
    !ENDS.includes(state.step);
}

function guardHistory() {
  if (historyGuarded || !studyOpen()) return;
  history.pushState({ study: code }, "", location.href);
  historyGuarded = true;
}

// Escape closes the confirmation; Back keeps an open study on its page.
export function guardLeaving() {
  document.addEventListener("keydown", (event) => { if (event.key === "Escape") closeConfirm(); });
  ["pointerdown", "pointerup", "keydown"].forEach((name) => document.addEventListener(name, guardHistory, true));
  window.addEventListener("popstate", () => {
    if (!historyGuarded) return;
    historyGuarded = false;
    if (studyOpen()) toast(t("back_stays", { leave: t("leave") })); else history.back();
  });
}
