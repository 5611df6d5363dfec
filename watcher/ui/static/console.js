// The console's shell: the token form, the search box, the live-stream status, and the
// page shown for the address's #fragment, refreshed on a timer and on live events.

import { ApiRefusal, get, isAdmin, setToken, token } from "./api.js";
import { el } from "./dom.js";
import * as pages from "./pages.js";
import { LiveStream } from "./stream.js";

const REFRESH_MS = 2000;
const EVENT_REFRESH_MS = 250;

const main = document.getElementById("main");
const problem = document.getElementById("problem");
const streamState = document.getElementById("stream-state");

let current = null; // { page, ctx, data }
let adminAnswer = null;
let loading = false;
let eventTimer = null;
let again = null; // { asked }: a refresh wanted while one was loading

function showProblem(message) {
  problem.textContent = message || "";
  problem.hidden = !message;
}

function route() {
  const [name, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  const page = pages[name] ? name : "chains";
  return { name: page, arg: rest.length ? decodeURIComponent(rest.join("/")) : null };
}

function mark(name) {
  const base = name === "settlement" ? "settlements" : name;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === `#/${base}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

// `moved`: the operator went to another page, so focus goes to its heading (a screen reader
// announces it); not on the first load, nor on a timed refresh.
function show(moved = false) {
  const { name, arg } = route();
  const page = pages[name];
  mark(name);
  const ctx = {
    arg,
    reload: () => refresh(true),
    admin: async () => (adminAnswer ??= await isAdmin()),
    say: (text) => { const said = document.getElementById("said"); if (said) said.textContent = text; },
  };
  const title = arg ? `${page.title} ${arg}` : page.title;
  document.title = `${title} — Finality Watcher`;
  const data = el("section", { "aria-live": "off", id: "data" });
  main.replaceChildren(el("h1", { text: title }), page.setup ? page.setup(ctx) : "", data);
  current = { page, ctx, data };
  if (moved) main.focus();
  refresh();
}

// A refresh never takes a keyboard user's focus away (a live event may come at any time):
// when focus is inside the data, the new data is shown only if it holds the same element
// (same tag, link and label, the n-th such), and focus moves there in the same task, so a
// key pressed next acts on it; otherwise the data stays as it is and the timed refresh
// shows the new one once focus has left. `asked`: the operator's own action (a filter, a
// page button, a replay) reloads even if the element they used is gone from the new data.
async function refresh(asked = false) {
  if (!current) return;
  if (loading) {
    again ||= { asked };
    again.asked ||= asked;
    return;
  }
  loading = true;
  const shown = current;
  try {
    const node = await shown.page.load(shown.ctx);
    if (current === shown) put(shown.data, node, asked);
    if (current === shown) showProblem("");
  } catch (e) {
    if (current === shown) {
      const message = e instanceof ApiRefusal ? e.message : `The API could not be read: ${e.message}`;
      showProblem(message);
      put(shown.data, el("p", { text: message }), asked);
    }
  } finally {
    loading = false;
  }
  // A refresh asked for while this one was loading (a filter typed meanwhile) is not lost.
  if (again) {
    const { asked: wanted } = again;
    again = null;
    refresh(wanted);
  }
}

function put(data, node, asked) {
  const focused = data.contains(document.activeElement) ? document.activeElement : null;
  const same = focused && counterpart(data, node, focused);
  if (focused && !same && !asked) return;
  data.replaceChildren(node);
  same?.focus();
}

function counterpart(data, node, focused) {
  const key = (e) => [e.getAttribute("href"), e.getAttribute("aria-label"), e.id, e.textContent].join("\n");
  const want = key(focused);
  const alike = (root) => [...(root.querySelectorAll?.(focused.tagName) ?? [])].filter((e) => key(e) === want);
  return alike(node)[alike(data).indexOf(focused)] ?? null;
}

function onEvent(kind, event) {
  streamState.dataset.lastEvent = String(event.id);
  // Many events a second must not mean many reloads: at most one per EVENT_REFRESH_MS.
  if (eventTimer === null) eventTimer = setTimeout(() => { eventTimer = null; refresh(); }, EVENT_REFRESH_MS);
}

function onStreamState(state, why) {
  streamState.dataset.state = state;
  streamState.textContent = state === "live" ? "Live updates: connected" : `Live updates: disconnected (${why}); reconnecting`;
}

const stream = new LiveStream(onEvent, onStreamState);

document.getElementById("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const box = document.getElementById("token");
  setToken(box.value.trim());
  box.value = "";
  tokenHint();
  adminAnswer = null;
  stream.restart();
  show();
});

document.getElementById("token-forget").addEventListener("click", () => {
  setToken("");
  tokenHint();
  adminAnswer = null;
  stream.restart();
  show();
});

document.getElementById("search").addEventListener("submit", async (e) => {
  e.preventDefault();
  const q = document.getElementById("search-q").value.trim();
  if (!q) return;
  try {
    const ids = await find(q);
    if (ids.length === 1) {
      location.hash = `#/settlement/${encodeURIComponent(ids[0])}`;
      return;
    }
    showProblem("");
    main.replaceChildren(el("h1", { text: `Settlements matching ${q}` }),
      el("ul", {}, ids.map((id) => el("li", {}, el("a", { href: `#/settlement/${encodeURIComponent(id)}`, text: id })))));
    current = null;
  } catch (err) {
    showProblem(err.message);
  }
});

// The API decides what the text names (an id, a tx hash, a payment's reference, a source's
// ref): one match opens it, several are listed.
async function find(q) {
  const { settlement_ids: ids } = await get("/v1/search", { q });
  if (!ids.length) throw new Error(`Nothing of yours matches ${q}.`);
  return ids;
}

window.addEventListener("hashchange", () => show(true));
// A keyboard user's focus inside the data is not pulled away by a timed refresh.
setInterval(() => { if (!document.hidden && !current?.data.contains(document.activeElement)) refresh(); }, REFRESH_MS);
function tokenHint() {
  const hint = token() ? "token set (this tab only)" : "no token set";
  document.getElementById("token").setAttribute("placeholder", hint);
}

tokenHint();
show();
stream.start();
