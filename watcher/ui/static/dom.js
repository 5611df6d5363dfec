// Building the page from data without ever parsing data as markup: every datum goes in as
// text (textContent / createTextNode), never through innerHTML.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = String(v);
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A semantic table: caption, a header row of column names, one row per item.
// `columns`: [{ head, cell(item) -> Node|string, num? }]
export function table(caption, columns, items, empty = "Nothing yet.") {
  if (!items.length) return el("p", { class: "muted", text: `${caption}: ${empty}` });
  const head = el("tr", {}, columns.map((c) => el("th", { scope: "col", class: c.num ? "num" : null, text: c.head })));
  const rows = items.map((item) =>
    el("tr", {}, columns.map((c) => el("td", { class: c.num ? "num" : null }, cellOf(c.cell(item))))));
  return el("table", {}, el("caption", { text: caption }), el("thead", {}, head), el("tbody", {}, rows));
}

function cellOf(value) {
  if (value === undefined || value === null || value === "") return "—";
  return value;
}

export function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", {}, cellOf(v))]));
}

export function when(ms) {
  if (ms === undefined || ms === null) return "—";
  const d = new Date(Number(ms));
  return Number.isNaN(d.getTime()) ? "—" : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function short(hash) {
  if (!hash) return "—";
  const s = String(hash);
  return el("span", { class: "hash", title: s, text: s.length > 20 ? `${s.slice(0, 10)}…${s.slice(-8)}` : s });
}

const VERDICT_CLASS = {
  FINALITY_CONFIRMED: "ok",
  AWAITING_FINALITY: "wait",
  NO_SETTLEMENT: "wait",
  SETTLEMENT_FAILED: "bad",
  TIMEOUT_TREATED_AS_FAILURE: "bad",
};

// A verdict in words (colour only repeats what the words say).
export function verdict(name) {
  return el("span", { class: `verdict ${VERDICT_CLASS[name] || ""}`, text: name || "—" });
}

export function link(href, text) {
  return el("a", { href, text });
}
