// Connection and sync: the Socket.IO connection, messages sent with a fresh id and resent
// until acknowledged (after a lost ack or a reconnect), and the state the server sends.
// The server is the authority (docs/socket-protocol.md): the page only shows its state.
import { el, showMessage, toast } from "./page.js";
import { t } from "./texts.js";

export const code = document.getElementById("app").dataset.code;
// The worker process the connection asks for (`study serve --workers`; docs/deploy.md):
// the page's own code, then its team's once it has one (`state.route`), so teammates share
// a process and their pushes to each other stay in it.
let route = code;
export const socket = io({ transports: ["websocket", "polling"], query: { route: route } });
export let state = null;
export let displaced = false;  // another tab of this browser took the study over
let joined = false;            // this connection's join was answered: messages may go
let offset = 0;                // server clock minus this browser's clock, in seconds
const pending = new Map();     // msg_id -> [event, payload] sent but not yet acknowledged
// What the page does with a new state (`draw`) and when another tab took over (`elsewhere`).
const hooks = {};

export function messageId() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function send(event, payload) {
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
      // Before this connection's join, a message would reach the server from a connection
      // not yet the participant's and be refused, and a click lost: it stays in `pending`,
      // and the join sends it.
      if (!joined) { resolve(null); return; }
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
const QUIET = new Set(["duplicate", "out-of-order", "paused", "aborted", "finished",
  "probe-answered", "probe-missed"]);

function explain(reason) {
  const key = reason.replace(/-/g, "_");
  return ["too_fast", "wrong_cookie", "round_closed", "invalid_answer"].includes(key)
    ? t(key) : t("refused", { reason: reason });
}

// A code is bound to the first browser that joins it, and the newest tab of that browser
// wins (docs/socket-protocol.md): an older tab is told and offers to continue here.
export function join() {
  socket.emit("join", { code: code }, (reply) => {
    if (reply.reason === "storage-unavailable") { oneMoment(reply, join); return; }
    oneMoment(null);
    if (!reply.ok) { refusedJoin(reply.reason); return; }
    displaced = false;
    joined = true;
    receive(reply.state);
    pending.forEach(([event, message]) => emit(event, message));
  });
}

function refusedJoin(reason) {
  const key = { "other-browser": "other_browser", "no-cookie": "no_cookie" }[reason] || "bad_link";
  showMessage(t(key + "_title"), t(key + "_text"));
}

function showElsewhere() {
  displaced = true;
  hooks.elsewhere();
}

function receive(next) {
  if (displaced) return;
  // Acks and pushes may cross on the way: a state built before the one shown is stale.
  if (state && next.now < state.now) return;
  offset = next.now - Date.now() / 1000;
  state = next;
  hooks.draw();
  if (next.route && next.route !== route) reroute(next.route);
}

// Connects again asking for the new route's process; the reconnect's join brings the
// state, and messages not yet acknowledged are sent again after it.
let rerouting = false;
function reroute(next) {
  route = next;
  socket.io.opts.query = { route: route };
  rerouting = true;
  socket.disconnect().connect();
}

export function serverNow() { return Date.now() / 1000 + offset; }

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

// This step's answer (or a plain "continue").
export function submit(data) { return send("submit", { step: state.step, data: data || {} }); }

// Connects the page: `draw` shows each new state, `elsewhere` says another tab took over.
export function connect(draw, elsewhere) {
  Object.assign(hooks, { draw, elsewhere });
  socket.on("connect", () => {
    document.getElementById("offline").hidden = true;
    if (!displaced) join();
  });
  socket.on("elsewhere", showElsewhere);
  socket.on("disconnect", () => {
    joined = false;
    document.getElementById("offline").hidden = rerouting;
    rerouting = false;
  });
  socket.on("state", receive);
  setInterval(watchServer, 250);
}
