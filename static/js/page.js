// Page helpers every part draws with: elements, the SVG symbols of participant.html,
// paragraphs, buttons that wait for the server, the toast, and the one timer a view ticks by.
const app = document.getElementById("app");
let ticking = null;  // the timer of the view on screen (a countdown, a round's clock)

export function el(tag, attrs, ...children) {
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

export function svgUse(symbol, cls) {
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
export function icing(theme) {
  return "--theme:" + theme.colour + ";--theme-ink:" + theme.ink;
}

export function paragraphs(text) {
  return (text || "").split(/\n\s*\n/).filter((p) => p.trim()).map((p) => el("p", {}, p.trim()));
}

export function toast(text) {
  const node = document.getElementById("toast");
  node.textContent = text;
  node.hidden = false;
  clearTimeout(node._hide);
  node._hide = setTimeout(() => { node.hidden = true; }, 2500);
}

// A button whose action returns a promise stays disabled until the server answered; it
// comes back only if the message was refused (an accepted one redraws the page anyway).
export function button(label, onclick, cls, extra) {
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

// A message instead of a step (a refused join, another tab): there may be no state yet.
export function showMessage(title, text, ...children) {
  app.replaceChildren(el("section", { class: "card", "data-step": "message" },
    el("h2", {}, title), paragraphs(text), ...children));
}

// The view on screen redraws its changing parts every `ms`: one view, one timer.
export function tickEvery(ms, tick) {
  ticking = setInterval(tick, ms);
}

// A new view (or none) replaces the one on screen: its timer stops.
export function stopTicking() {
  clearInterval(ticking);
}
