// The participant's page: draws each step from the state the server sends.
// The server is the authority (docs/socket-protocol.md): this script only shows the state,
// sends what the participant does with a fresh message id, and resends it after a reconnect.
(function () {
  "use strict";

  const app = document.getElementById("app");
  const code = app.dataset.code;
  const socket = io({ transports: ["websocket", "polling"] });
  let state = null;
  let offset = 0;            // server clock minus this browser's clock, in seconds
  let renderedKey = null;    // what is on screen, so a push does not wipe a half-made cookie
  let timer = null;
  let teammateSince = null;  // when the teammate's current cookie was started
  const pending = new Map(); // msg_id -> [event, payload] sent but not yet acknowledged

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

  function emit(event, message) {
    return new Promise((resolve) => {
      socket.timeout(8000).emit(event, message, (error, reply) => {
        if (error) { resolve(null); return; }     // kept in `pending`, resent on reconnect
        pending.delete(message.msg_id);
        if (reply.state) { receive(reply.state); }
        if (!reply.ok && reply.reason !== "duplicate") { toast(explain(reply.reason)); }
        resolve(reply);
      });
    });
  }

  function explain(reason) {
    const texts = {
      "too-fast": "Easy there — that cookie was too quick to count.",
      "wrong-cookie": "That cookie does not match the pattern.",
      "round-closed": "Time was up before that cookie arrived.",
      "invalid-answer": "Please answer every question.",
    };
    return texts[reason] || "The bakery could not take that (" + reason + ").";
  }

  socket.on("connect", () => {
    document.getElementById("offline").hidden = true;
    socket.emit("join", { code: code }, (reply) => {
      if (!reply.ok) { showMessage("This link is not valid", "Please check the link you were given."); return; }
      receive(reply.state);
      pending.forEach(([event, message]) => emit(event, message));
    });
  });
  socket.on("disconnect", () => { document.getElementById("offline").hidden = false; });
  socket.on("state", receive);
  socket.on("teammate", (update) => {
    if (!state || !state.round || !state.round.teammate || state.round.id !== update.round_id) return;
    state.round.teammate.cookies = update.cookies;
    state.round.teammate.next_at = update.next_at;
    teammateSince = serverNow();
    drawTeammate();
  });

  function receive(next) {
    offset = next.now - Date.now() / 1000;
    state = next;
    render();
  }

  function serverNow() { return Date.now() / 1000 + offset; }

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

  function button(label, onclick, cls, extra) {
    return el("button", Object.assign({ class: "button " + (cls || "primary"), type: "button", onclick: onclick }, extra || {}), label);
  }

  function submit(data) { return send("submit", { step: state.step, data: data || {} }); }

  function showMessage(title, text) {
    app.replaceChildren(card({ title: title, text: text }));
  }

  // --- drawing the steps -----------------------------------------------------------------

  function render() {
    const progress = document.getElementById("progress");
    progress.style.width = (100 * state.progress.index / state.progress.total) + "%";
    const round = state.round;
    const key = state.step + "|" + (round ? (round.running ? "run" + round.id : "ready" + round.next) : "");
    if (key === renderedKey) { updateRound(); return; }
    renderedKey = key;
    clearInterval(timer);
    const views = {
      consent: viewConsent, themes: viewThemes, preferences: viewPreferences,
      teammate: viewTeammate, debrief: viewDebrief, post: viewQuestionnaire,
    };
    let view = views[state.step];
    if (!view && /^intro-/.test(state.step)) view = viewIntro;
    if (!view && /^questionnaire-/.test(state.step)) view = viewQuestionnaire;
    if (!view && round) view = round.running ? viewRound : viewReady;
    if (!view) view = () => card(state.page);
    app.replaceChildren(view());
    window.scrollTo(0, 0);
  }

  function viewConsent() {
    return card(state.page, el("div", { class: "actions" },
      button("I agree to take part", () => submit({ agree: true }), "primary", { "data-action": "agree" }),
      button("I do not agree", () => submit({ agree: false }), "secondary", { "data-action": "decline" })));
  }

  function themeCard(theme) {
    return el("article", { class: "theme", style: "--theme:" + theme.colour },
      el("div", { class: "theme-cookie" }, el("span", {}, theme.text)),
      el("h3", {}, theme.name),
      el("p", {}, theme.description),
      el("p", { class: "theme-cookie-type" }, "Decorated on the " + theme.cookie + " cookies"));
  }

  function viewThemes() {
    return card(state.page, el("div", { class: "themes" }, state.page.themes.map(themeCard)),
      el("div", { class: "actions" }, button("Continue", () => submit(), "primary", { "data-action": "continue" })));
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
    const go = button("Continue", () => submit({ ratings: ratings }), "primary", { disabled: true, "data-action": "continue" });
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
    return card(state.page, el("div", { class: "teammate-hello" }, svgUse("baker", "baker"),
      el("p", {}, "Your teammate's station is in the room next door — the programs are synced.")),
      el("div", { class: "actions" }, button("Continue", () => submit(), "primary", { "data-action": "continue" })));
  }

  function viewIntro() {
    const page = state.page;
    const bubble = state.page.transparency || null;
    return el("section", { class: "card robot-intro", "data-step": state.step },
      el("div", { class: "robot-portrait" }, svgUse("robot", "robot big"), el("div", { class: "nameplate" }, "Robot " + page.robot)),
      el("div", {}, el("h2", {}, page.title), paragraphs(page.text),
        bubble ? el("blockquote", { class: "bubble" }, bubble) : null,
        el("div", { class: "actions" }, button("Start the session", () => submit(), "primary", { "data-action": "continue" }))));
  }

  function viewQuestionnaire() {
    const page = state.page;
    const answers = {};
    const form = page.items.map((item, index) => el("div", { class: "question-item", "data-item": item.id },
      el("p", { class: "item-text" }, (index + 1) + ". " + item.text), questionInput(item, answers)));
    const go = button("Submit", async () => {
      const missing = page.items.filter((item) => item.required && (answers[item.id] === undefined || answers[item.id] === ""));
      if (missing.length) { toast("Please answer every question."); return; }
      go.disabled = true;
      const reply = await submit({ answers: answers });
      if (!reply || !reply.ok) go.disabled = false;
    }, "primary", { "data-action": "submit" });
    return el("section", { class: "card wide", "data-step": state.step }, el("h2", {}, page.title),
      paragraphs(page.text), form, el("div", { class: "actions" }, go));
  }

  function questionInput(item, answers) {
    if (item.kind === "likert") return likert(item.id, item, (v) => { answers[item.id] = v; });
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

  function viewDebrief() {
    return card(state.page, el("div", { class: "actions" },
      button("Yes, you may use my data", () => submit({ consent: true }), "primary", { "data-action": "keep" }),
      button("No, delete my data", () => submit({ consent: false }), "secondary", { "data-action": "withdraw" })));
  }

  // --- the bakery: rounds ----------------------------------------------------------------

  function roundTitle(round) {
    const what = round.session === 0 ? "Practice round" : "Round";
    return what + " " + (round.number || round.next) + " of " + round.of;
  }

  function counter(round) {
    const station = round.station;
    if (!station) return null;
    return el("div", { class: "fetch-station" }, el("span", { class: "label" }, "Kits waiting"),
      el("span", { class: "kits squares" }, svgUse("kit", "kit"), "squares × " + station[0]),
      el("span", { class: "kits letters" }, svgUse("kit", "kit"), "letters × " + station[1]));
  }

  function viewReady() {
    const round = state.round;
    const last = state.last_round;
    const summary = last && last.session === round.session ? el("p", { class: "summary" },
      "Round " + last.number + ": you finished " + last.cookies + " " + last.task_name + " cookie" + (last.cookies === 1 ? "" : "s") +
      (last.teammate_cookies !== null ? ", your teammate " + last.teammate_cookies + "." : ".")) : null;
    const robot = state.robot ? "Robot " + state.robot.name + " is ready to bring the next kits." : "";
    return el("section", { class: "card bakery-ready", "data-step": state.step },
      el("h2", {}, state.page.title), paragraphs(state.page.text), summary,
      el("div", { class: "ready-row" }, state.robot ? svgUse("robot", "robot") : null, el("p", {}, robot)),
      counter(round),
      el("div", { class: "actions" }, button("Start " + roundTitle(round).toLowerCase(),
        async (e) => {
          e.target.disabled = true;
          const reply = await send("start_round", { round: round.next });
          if (!reply || !reply.ok) e.target.disabled = false;
        }, "primary", { "data-action": "start-round" })));
  }

  function viewRound() {
    const round = state.round;
    const mine = el("div", { class: "station mine" }, el("h3", {}, "Your station"),
      el("div", { class: "kit-tag" }, svgUse("kit", "kit"), round.task_name + " cookies"),
      el("div", { class: "work", id: "work" }),
      el("div", { class: "finished" }, el("span", { id: "my-count" }, ""), el("div", { class: "plate", id: "my-plate" })));
    const stations = [mine];
    if (round.teammate) {
      stations.push(el("div", { class: "station theirs", id: "teammate" }, el("h3", {}, "Teammate's station (next room)"),
        el("div", { class: "kit-tag" }, svgUse("kit", "kit"), round.teammate.task_name + " cookies"),
        el("div", { class: "teammate-work" }, svgUse("baker", "baker"), el("div", { class: "mini-cookie " + round.teammate.task_name }),
          el("div", { class: "meter" }, el("div", { class: "meter-fill", id: "teammate-meter" }))),
        el("div", { class: "finished" }, el("span", { id: "teammate-count" }, ""), el("div", { class: "plate", id: "teammate-plate" }))));
    }
    const lane = round.teammate ? el("div", { class: "robot-lane" }, counter(round),
      el("div", { class: "robot-runner", id: "runner" },
        el("div", { class: "carry" }, el("span", { class: "carried mine " + round.task_name }, svgUse("kit", "kit"), "you"),
          el("span", { class: "carried theirs " + round.teammate.task_name }, svgUse("kit", "kit"), "teammate")),
        svgUse("robot", "robot"), el("span", { class: "nameplate" }, "Robot " + state.robot.name))) : null;
    const view = el("section", { class: "bakery", "data-step": state.step, "data-round": round.id, "data-deadline": round.deadline },
      el("div", { class: "round-head" }, el("h2", {}, roundTitle(round)),
        el("div", { class: "timer", id: "timer" }, "")),
      lane, el("div", { class: "stations" }, stations));
    setTimeout(() => {
      drawWork(round);
      teammateSince = round.started_at;
      updateRound();
      deliver();
    }, 0);
    timer = setInterval(tickDisplay, 200);
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
    if (mine) mine.textContent = "Finished: " + round.cookies;
    plate("my-plate", round.cookies, round.task_name);
    drawTeammate();
    tickDisplay();
  }

  function drawTeammate() {
    const round = state && state.round;
    if (!round || !round.teammate) return;
    const count = document.getElementById("teammate-count");
    if (count) count.textContent = "Finished: " + round.teammate.cookies;
    plate("teammate-plate", round.teammate.cookies, round.teammate.task_name);
  }

  function tickDisplay() {
    const round = state.round;
    if (!round || !round.running) return;
    const left = Math.max(0, round.deadline - serverNow());
    const node = document.getElementById("timer");
    if (node) {
      node.textContent = left > 0 ? Math.ceil(left) + " s" : "Time!";
      node.classList.toggle("hurry", left < 5);
    }
    const work = document.getElementById("work");
    if (work) work.classList.toggle("stopped", left <= 0);
    const meter = document.getElementById("teammate-meter");
    if (meter && round.teammate) {
      const next = round.teammate.next_at;
      const share = next ? Math.min(1, (serverNow() - teammateSince) / Math.max(0.1, next - teammateSince)) : 0;
      meter.style.width = (100 * Math.max(0, share)) + "%";
    }
  }

  function drawWork(round) {
    const work = document.getElementById("work");
    if (!work) return;
    work.replaceChildren(round.target.kind === "letters" ? lettersCookie(round) : squaresCookie(round));
  }

  // Every element placed or taken off reports the cookie as now decorated, so the server
  // measures a practice round continuously (docs/model.md). No retry and no message: a lost
  // report only leaves the measure on the one before it.
  function reportProgress(round, content) {
    socket.emit("progress", { msg_id: messageId(), round_id: round.id, content: content });
  }

  function finishCookie(round, content) {
    send("cookie", { round_id: round.id, content: content });
    const work = document.getElementById("work");
    if (work) { work.classList.remove("baked"); void work.offsetWidth; work.classList.add("baked"); }
    setTimeout(() => drawWork(round), 250);
  }

  // Letters cookie: drag whole letters from the tray onto the cookie (pointer events, so a
  // mouse, a finger and Playwright's mouse all drag the same way).
  function lettersCookie(round) {
    const target = round.target;
    const placed = [];
    const words = target.text.split(/\s+/).filter(Boolean);
    const cookie = el("div", { class: "cookie round-cookie", style: "--theme:" + target.colour, "data-target": target.text });
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
      el("p", { class: "hint" }, "Drag the letters onto the cookie to spell " + target.text + ". Click a letter on the cookie to take it off."), tray);
  }

  // Squares cookie: click boxes of the grid to draw the letters shown faintly.
  function squaresCookie(round) {
    const target = round.target;
    const wanted = new Set(target.cells);
    const filled = new Set();
    const grid = el("div", { class: "grid", style: "grid-template-columns: repeat(" + target.cols + ", 1fr)" });
    for (let cell = 0; cell < target.rows * target.cols; cell += 1) {
      const box = el("button", { type: "button", class: "box" + (wanted.has(cell) ? " guide" : ""), "data-cell": cell });
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
      el("div", { class: "cookie square-cookie", style: "--theme:" + target.colour, "data-target": target.text }, grid),
      el("p", { class: "hint" }, "Click the boxes to draw " + target.text + ". Click again to clear a box."));
  }
})();
