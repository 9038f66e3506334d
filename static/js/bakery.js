// The participant's page: draws each step from the state the server sends.
// The server is the authority (docs/socket-protocol.md): this script only shows the state,
// sends what the participant does with a fresh message id, and resends it until it is
// acknowledged (after a lost ack or a reconnect).
(function () {
  "use strict";

  const app = document.getElementById("app");
  const code = app.dataset.code;
  const REDIRECT_SECONDS = 10;
  let displaced = false;     // another tab of this browser took the study over
  const socket = io({ transports: ["websocket", "polling"] });
  let state = null;
  let offset = 0;            // server clock minus this browser's clock, in seconds
  let renderedKey = null;    // what is on screen, so a push does not wipe a half-made cookie
  let timer = null;
  const delivered = deliveredRounds();  // rounds whose kit hand-out this tab already showed
  const pending = new Map(); // msg_id -> [event, payload] sent but not yet acknowledged
  // Every word the page shows: the protocol's [texts] over the defaults of study/protocol/texts.py.
  const TEXTS = JSON.parse(document.getElementById("texts").textContent);

  function t(key, values) {
    return TEXTS[key].replace(/\{([a-z_]+)\}/g, (whole, name) =>
      (values && name in values ? String(values[name]) : whole));
  }

  // A text showing a number: its singular `<key>_one` when the number is 1 (study/protocol/texts.py).
  function tn(key, count, values) {
    return t(count === 1 && (key + "_one") in TEXTS ? key + "_one" : key, values);
  }

  // --- talking to the server -------------------------------------------------------------

  function messageId() {
    const bytes = new Uint8Array(12);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function send(event, payload) {
    const msgId = messageId();
    const message = Object.assign({ msg_id: msgId }, payload);
    pending.set(msgId, [event, message]);
    return emit(event, message);
  }

  // A message with no ack within this time is sent again with the same msg_id: the server
  // applies a message id once and answers a repeat as a duplicate, so a lost ack never
  // loses a cookie or an answer.
  const ACK_TIMEOUT_MS = 4000;

  function emit(event, message) {
    return new Promise((resolve) => {
      const attempt = () => {
        socket.timeout(ACK_TIMEOUT_MS).emit(event, message, (error, reply) => {
          if (error) {
            // Still connected: the ack was lost, send again. Disconnected: kept in
            // `pending`, resent after the reconnect's join.
            if (socket.connected && pending.has(message.msg_id)) attempt(); else resolve(null);
            return;
          }
          if (reply.reason === "storage-unavailable") {
            oneMoment(reply, () => {
              if (socket.connected && pending.has(message.msg_id)) attempt(); else resolve(null);
            });
            return;
          }
          oneMoment(null);
          pending.delete(message.msg_id);
          if (reply.reason === "elsewhere") { showElsewhere(); resolve(reply); return; }
          if (reply.state) { receive(reply.state); }
          if (!reply.ok && !QUIET.has(reply.reason)) { toast(explain(reply.reason)); }
          resolve(reply);
        });
      };
      attempt();
    });
  }

  // The server could not store a message (its disk is full; docs/socket-protocol.md): no
  // refusal. The message stays pending and goes again after `retry_after` seconds, and a
  // calm banner shows until an answer comes through; null hides it.
  function oneMoment(reply, retry) {
    let banner = document.getElementById("one-moment");
    if (!reply) { if (banner) banner.hidden = true; return; }
    if (!banner) {
      banner = el("div", { id: "one-moment", class: "one-moment", role: "status" });
      document.body.append(banner);
    }
    banner.textContent = t("storage_wait");
    banner.hidden = false;
    setTimeout(retry, 1000 * (reply.retry_after || 5));
  }

  // Refusals the page answers by showing the state that comes with them, not with a toast:
  // a double click's second message, a step already taken, the experimenter's hold.
  const QUIET = new Set(["duplicate", "out-of-order", "paused", "aborted", "finished"]);

  function explain(reason) {
    const key = reason.replace(/-/g, "_");
    return ["too_fast", "wrong_cookie", "round_closed", "invalid_answer"].includes(key)
      ? t(key) : t("refused", { reason: reason });
  }

  socket.on("connect", () => {
    document.getElementById("offline").hidden = true;
    if (!displaced) join();
  });

  // A code is bound to the first browser that joins it, and the newest tab of that browser
  // wins (docs/socket-protocol.md): an older tab is told and offers to continue here.
  function join() {
    socket.emit("join", { code: code }, (reply) => {
      if (reply.reason === "storage-unavailable") { oneMoment(reply, join); return; }
      oneMoment(null);
      if (!reply.ok) { refusedJoin(reply.reason); return; }
      displaced = false;
      receive(reply.state);
      pending.forEach(([event, message]) => emit(event, message));
    });
  }

  function refusedJoin(reason) {
    const key = { "other-browser": "other_browser", "no-cookie": "no_cookie" }[reason] || "bad_link";
    showMessage(t(key + "_title"), t(key + "_text"));
  }

  socket.on("elsewhere", showElsewhere);

  function showElsewhere() {
    displaced = true;
    renderedKey = null;
    clearInterval(timer);
    showMessage(t("other_tab_title"), t("other_tab_text"),
      el("button", { class: "button primary", type: "button", "data-action": "continue-here", onclick: join }, t("continue_here")));
  }
  socket.on("disconnect", () => { document.getElementById("offline").hidden = false; });
  socket.on("state", receive);
  socket.on("station", receiveStation);

  // A real teammate placed an element or finished a cookie (docs/teams.md): their station
  // is redrawn at once; the next state corrects it if a push was lost.
  function receiveStation(update) {
    const round = state && state.round;
    if (!round || !round.running || !round.stations) return;
    const station = round.stations.find((s) => s.seat === update.seat && s.team_round === update.team_round);
    if (!station || station.kind !== "person") return;
    Object.assign(station, { cookies: update.cookies, placed: update.placed, elements: update.elements });
    drawStations();
  }

  function receive(next) {
    if (displaced) return;
    // Acks and pushes may cross on the way: a state built before the one shown is stale.
    if (state && next.now < state.now) return;
    offset = next.now - Date.now() / 1000;
    state = next;
    render();
  }

  function serverNow() { return Date.now() / 1000 + offset; }

  // --- resynchronising: the page never depends on a push ----------------------------------
  // A push can be lost (the servers' message queue away, a push sent while reconnecting).
  // Every (re)connect joins, and the join answers with the state; besides, a page that waits
  // on the server asks for the state itself (`sync`): SYNC_GRACE_S after a round's deadline
  // by the server clock, then every SYNC_EVERY_MS while it still waits (a round not yet
  // closed, the step's last round over, the experimenter's pause).
  const SYNC_GRACE_S = 1.5;
  const SYNC_EVERY_MS = 4000;
  let waitedOn = null;  // what the page waits on: a new wait starts its own clock
  let syncAt = 0;       // Date.now() of the next sync while waiting

  function waitingOn() {
    const round = state && state.round;
    if (round && round.running) return serverNow() > round.deadline + SYNC_GRACE_S ? "close " + round.id : null;
    if (state && state.hold === "paused") return "hold";
    if (state && state.step === "lobby") return "lobby";
    if (round && round.next === null) return "next " + state.step;
    return null;
  }

  function watchServer() {
    const wait = displaced || !socket.connected ? null : waitingOn();
    if (wait !== waitedOn) {
      waitedOn = wait;
      syncAt = Date.now() + (wait && wait.startsWith("close") ? 0 : SYNC_EVERY_MS);
    }
    if (!wait || Date.now() < syncAt) return;
    syncAt = Date.now() + SYNC_EVERY_MS;
    socket.timeout(ACK_TIMEOUT_MS).emit("sync", {}, (error, reply) => {
      if (error) return;
      if (reply.reason === "elsewhere") showElsewhere(); else if (reply.state) receive(reply.state);
    });
  }

  setInterval(watchServer, 250);

  // --- small helpers ---------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([key, value]) => {
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value);
    });
    children.flat().forEach((child) => {
      if (child !== null && child !== undefined) node.append(child.nodeType ? child : String(child));
    });
    return node;
  }

  function svgUse(symbol, cls) {
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", cls);
    const use = document.createElementNS(ns, "use");
    use.setAttribute("href", "#" + symbol);
    svg.append(use);
    return svg;
  }

  // A theme's icing colour and the ink its words are written in on it (dark or white,
  // whichever contrasts more: the server picks it, study/protocol/colours.py).
  function icing(theme) {
    return "--theme:" + theme.colour + ";--theme-ink:" + theme.ink;
  }

  function paragraphs(text) {
    return (text || "").split(/\n\s*\n/).filter((p) => p.trim()).map((p) => el("p", {}, p.trim()));
  }

  function toast(text) {
    const node = document.getElementById("toast");
    node.textContent = text;
    node.hidden = false;
    clearTimeout(node._hide);
    node._hide = setTimeout(() => { node.hidden = true; }, 2500);
  }

  function card(page, ...children) {
    return el("section", { class: "card", "data-step": state.step },
      el("h2", {}, page.title), paragraphs(page.text), ...children);
  }

  // A button whose action returns a promise stays disabled until the server answered; it
  // comes back only if the message was refused (an accepted one redraws the page anyway).
  function button(label, onclick, cls, extra) {
    const node = el("button", Object.assign({ class: "button " + (cls || "primary"), type: "button" }, extra || {}), label);
    node.addEventListener("click", async (event) => {
      if (node.dataset.busy) return;
      node.dataset.busy = "1";
      node.disabled = true;
      const reply = await onclick(event);
      delete node.dataset.busy;
      if (!reply || !reply.ok) node.disabled = false;
    });
    return node;
  }

  function submit(data) { return send("submit", { step: state.step, data: data || {} }); }

  // A message instead of a step (a refused join, another tab): there may be no state yet.
  function showMessage(title, text, ...children) {
    app.replaceChildren(el("section", { class: "card", "data-step": "message" },
      el("h2", {}, title), paragraphs(text), ...children));
  }

  // --- drawing the steps -----------------------------------------------------------------

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
    clearInterval(timer);
    const views = {
      consent: viewConsent, themes: viewThemes, preferences: viewPreferences,
      teammate: viewTeammate, debrief: viewDebrief, post: viewQuestionnaire, done: viewDone,
      declined: viewEnded, withdrawn: viewEnded, unmatched: viewEnded, dropped: viewEnded,
      lobby: viewLobby,
    };
    let view = hold ? viewHold : views[state.step];
    if (!view && /^intro-/.test(state.step)) view = viewIntro;
    if (!view && /^questionnaire-/.test(state.step)) view = viewQuestionnaire;
    if (!view && round) view = round.running ? viewRound : viewReady;
    if (!view) view = () => card(state.page);
    app.replaceChildren(view());
    window.scrollTo(0, 0);
  }

  function viewConsent() {
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

  function viewThemes() {
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

  function viewPreferences() {
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

  function viewTeammate() {
    // A real team's page (docs/teams.md) says who the teammates are in its own words, and
    // lists every seat as the rounds will name it: a person or an agent.
    return card(state.page, state.team ? el("div", { class: "team-seats" },
      el("h3", {}, t("team_seats")), el("ul", { id: "team-seats" }, seatList())) :
      el("div", { class: "teammate-hello" }, svgUse("baker", "baker"), el("p", {}, t("teammate_hello"))),
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
  function viewLobby() {
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
    timer = setInterval(updateWaiting, 250);
    setTimeout(updateWaiting, 0);
    return view;
  }

  // What a waiting page shows that changes without a new view: the lobby's count and
  // countdown, a team's "next round in" and "waiting for".
  function updateWaiting() {
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

  // "Session 2 of 3" above the pages of a collaborative session (state.session).
  function sessionLabel() {
    const session = state.session;
    return session ? el("p", { class: "session-label", "data-session": session.number },
      t("session_of", { number: session.number, of: session.of })) : null;
  }

  function viewIntro() {
    const page = state.page;
    const bubble = state.page.transparency || null;
    return el("section", { class: "card robot-intro", "data-step": state.step },
      el("div", { class: "robot-portrait" }, svgUse("robot", "robot big"), el("div", { class: "nameplate" }, t("robot_name", { robot: page.robot }))),
      el("div", {}, sessionLabel(), el("h2", {}, page.title), paragraphs(page.text),
        bubble ? el("blockquote", { class: "bubble" }, bubble) : null,
        el("div", { class: "actions" }, button(t("start_session"), () => submit(), "primary", { "data-action": "continue" }))));
  }

  function viewQuestionnaire() {
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

  // Every two robots met, each pair one of the two (or the item's tie, "No difference").
  function pairsInput(item, answers) {
    const chosen = {};
    const pick = (key, value) => {
      chosen[key] = value;
      answers[item.id] = Object.keys(chosen).length === item.pairs.length ? Object.assign({}, chosen) : undefined;
    };
    return el("div", { class: "pairs", "data-item": item.id }, item.pairs.map((pair) => {
      const options = [[pair.a.id, t("robot_name", { robot: pair.a.name })], [pair.b.id, t("robot_name", { robot: pair.b.name })]];
      if (item.tie) options.push(["=", item.tie]);
      return el("fieldset", { class: "pair", "data-pair": pair.key, "aria-label": options.map((option) => option[1]).join(" / ") },
        el("div", { class: "choices" }, options.map(([value, label]) => el("label", { class: "choice" },
          el("input", { type: "radio", name: item.id + ":" + pair.key, value: value, onchange: () => pick(pair.key, value) }),
          el("span", {}, label)))));
    }));
  }

  function viewDebrief() {
    return card(state.page, el("div", { class: "actions" },
      button(t("keep_data"), () => submit({ consent: true }), "primary", { "data-action": "keep" }),
      button(t("delete_data"), () => submit({ consent: false }), "secondary", { "data-action": "withdraw" })));
  }

  function viewDone() {
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

  function viewEnded() { return card(state.page, returnLink()); }

  // The experimenter's hold: paused (this page continues by itself when resumed) or
  // aborted (the end). Withdrawing stays possible from both.
  function viewHold() {
    const page = state.hold_page;
    return el("section", { class: "card hold", "data-step": state.step, "data-hold": state.hold },
      state.hold === "paused" ? el("div", { class: "waiting", "aria-hidden": "true" }, el("span", {}), el("span", {}), el("span", {})) : null,
      el("h2", {}, page.title), paragraphs(page.text), state.hold === "aborted" ? returnLink() : null);
  }

  // --- leaving: "stop and withdraw" on every page after consent ---------------------------

  function drawLeave() {
    const leave = document.getElementById("leave");
    const open = state.step !== "consent" && !["done", "declined", "withdrawn", "unmatched", "dropped"].includes(state.step);
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

  document.addEventListener("keydown", (event) => { if (event.key === "Escape") closeConfirm(); });

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
      !["done", "declined", "withdrawn", "unmatched", "dropped"].includes(state.step);
  }

  function guardHistory() {
    if (historyGuarded || !studyOpen()) return;
    history.pushState({ study: code }, "", location.href);
    historyGuarded = true;
  }

  ["pointerdown", "pointerup", "keydown"].forEach((name) => document.addEventListener(name, guardHistory, true));

  window.addEventListener("popstate", () => {
    if (!historyGuarded) return;
    historyGuarded = false;
    if (studyOpen()) toast(t("back_stays", { leave: t("leave") })); else history.back();
  });

  function roundRunning() {
    const round = state && state.round;
    return Boolean(round && round.running && !displaced && serverNow() < round.deadline);
  }

  window.addEventListener("beforeunload", (event) => {
    if (!roundRunning()) return;
    event.preventDefault();
    event.returnValue = "";  // what older browsers need to ask
  });

  // --- the bakery: rounds ----------------------------------------------------------------

  function roundTitle(round, start) {
    const key = (start ? "start_" : "") + (round.session === 0 ? "practice_round" : "round");
    return t(key, { number: round.number || round.next, of: round.of });
  }

  function counter(round) {
    const station = round.station;
    if (!station) return null;
    return el("div", { class: "fetch-station" }, el("span", { class: "label" }, t("kits_waiting")),
      el("span", { class: "kits squares" }, svgUse("kit", "kit"), t("kits_left", { cookie: t("squares"), count: station[0] })),
      el("span", { class: "kits letters" }, svgUse("kit", "kit"), t("kits_left", { cookie: t("letters"), count: station[1] })));
  }

  function viewReady() {
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
    if (round.team) { timer = setInterval(updateWaiting, 250); setTimeout(updateWaiting, 0); }
    return el("section", { class: "card bakery-ready", "data-step": state.step },
      sessionLabel(), el("h2", {}, state.page.title), paragraphs(state.page.text), summary,
      el("div", { class: "ready-row" }, state.robot ? svgUse("robot", "robot") : null, el("p", {}, robot)),
      counter(round), start);
  }

  function viewRound() {
    const round = state.round;
    const mine = el("div", { class: "station mine" }, el("h3", {}, t("your_station")),
      el("div", { class: "kit-tag" }, svgUse("kit", "kit"), t("kit", { cookie: t(round.task_name) })),
      el("div", { class: "work", id: "work" }),
      el("div", { class: "finished" }, el("span", { id: "my-count" }, ""), el("div", { class: "plate", id: "my-plate" })));
    const others = mates(round);
    const stations = [mine, ...others.map(teammateStation)];
    const lane = others.length ? el("div", { class: "robot-lane" }, counter(round),
      el("div", { class: "robot-runner", id: "runner" },
        el("div", { class: "carry" }, el("span", { class: "carried mine " + round.task_name }, svgUse("kit", "kit"), t("carried_yours")),
          others.map((mate) => el("span", { class: "carried theirs " + mate.task_name }, svgUse("kit", "kit"), t("carried_teammates")))),
        svgUse("robot", "robot"), el("span", { class: "nameplate" }, t("robot_name", { robot: state.robot.name })))) : null;
    const view = el("section", { class: "bakery" + (others.length > 1 ? " three" : ""), "data-step": state.step, "data-round": round.id, "data-deadline": round.deadline },
      el("div", { class: "round-head" }, el("h2", {}, roundTitle(round)),
        el("div", { class: "timer", id: "timer" }, "")),
      lane, el("div", { class: "stations" }, stations));
    setTimeout(() => {
      drawWork(round, round.on_cookie);  // a page opened again mid-round: what was placed
      updateRound();
      if (others.length && !delivered.has(round.id)) {
        delivered.add(round.id);
        rememberDelivered();
        deliver();
      }
    }, 0);
    timer = setInterval(tickDisplay, 100);
    return view;
  }

  function deliver() {
    const runner = document.getElementById("runner");
    if (runner) { runner.classList.remove("delivering"); void runner.offsetWidth; runner.classList.add("delivering"); }
  }

  function plate(id, count, kind) {
    const node = document.getElementById(id);
    if (!node) return;
    node.replaceChildren(...Array.from({ length: count }, () => el("span", { class: "done-cookie " + kind })));
  }

  function updateRound() {
    const round = state.round;
    if (!round || !round.running) return;
    const mine = document.getElementById("my-count");
    if (mine) mine.textContent = t("finished", { count: round.cookies });
    plate("my-plate", round.cookies, round.task_name);
    drawStations();
    tickDisplay();
  }

  // The other stations of a round: the agent teammate of an individual study, or every
  // other seat of a real team (docs/teams.md), each with the id its elements go by.
  function mates(round) {
    if (round.teammate) return [Object.assign({ key: "teammate", kind: "agent", title: t("teammate_station"), room: true }, round.teammate)];
    return (round.stations || []).map((station) => Object.assign({
      key: "seat" + station.seat,
      title: t(station.taken_over ? "station_taken_over" : station.kind === "agent" ? "station_agent" : "station_person", { seat: station.seat + 1 }),
    }, station));
  }

  function drawStations() {
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

  // Every element placed or taken off reports the cookie as now decorated, so the server
  // measures a practice round continuously (docs/model.md). No retry and no message: a lost
  // report only leaves the measure on the one before it. A finished cookie still on the
  // station reports nothing: the server would count it towards the next cookie.
  let baking = false;
  function reportProgress(round, content) {
    if (baking) return;
    socket.emit("progress", { msg_id: messageId(), round_id: round.id, content: content });
  }

  function finishCookie(round, content) {
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

  function teammateStation(mate) {
    shown.delete(mate.key);
    return el("div", { class: "station theirs", id: mate.key, "data-kind": mate.kind },
      el("h3", {}, mate.title + " ", mate.room ? el("small", {}, t("next_room")) : null),
      el("div", { class: "teammate-work" },
        el("div", { class: "teammate-baker", id: mate.key + "-baker" }, svgUse("baker", "baker")),
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
})();
