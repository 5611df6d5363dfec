// The console's pages. Each page has a `setup(ctx)` building what stays put (headings,
// filters) and a `load(ctx)` answering the node that shows the current data; the shell
// calls `load` again on a timer and when the live stream says something happened.

import { ApiRefusal, get, getText, post } from "./api.js";
import { barChart, lineChart } from "./chart.js";
import { el, facts, link, short, table, verdict, when } from "./dom.js";

const VERDICTS = ["AWAITING_FINALITY", "FINALITY_CONFIRMED", "SETTLEMENT_FAILED", "TIMEOUT_TREATED_AS_FAILURE", "NO_SETTLEMENT"];
const STATES = ["pending", "sending", "delivered", "dead"];
const PAGE_SIZE = 50;

const seconds = (ms) => `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
const clock = (ms) => when(ms).slice(11, 19);

function settlementLink(id) {
  return link(`#/settlement/${encodeURIComponent(id)}`, id);
}

function finalityMeaning(chain) {
  const n = chain.confirmations;
  if (chain.finality === "finalized") return "final once the node's finalized block covers it";
  if (chain.finality === "safe") return "final once the node's safe block covers it";
  if (chain.finality === "depth_or_finalized") return `final at depth ${n}, or once finalized, whichever comes first`;
  if (chain.finality === "depth_and_finalized") return `final at depth ${n} and once finalized, both`;
  return `final at depth ${n} (${n} blocks including its own)`;
}

// A block tag's height; a tag the chain's rule does not read says so (no number made up).
function tagHeight(followed, number, tag) {
  if (!followed) return el("span", { "data-field": tag, class: "muted", text: "not followed" });
  return el("span", { "data-field": tag, text: number ?? "not read yet" });
}

// The depth rule in time: N blocks × the registry's block time ("≈ 2.4 min"); nothing when
// the chain's block time is unknown or the rule waits on a tag, not on depth alone.
function ruleInTime(chain) {
  if (!chain.block_time_s || chain.finality === "finalized" || chain.finality === "safe") return "";
  const s = chain.confirmations * chain.block_time_s;
  const text = s < 90 ? `${s.toFixed(s < 10 ? 1 : 0)} s` : s < 5400 ? `${(s / 60).toFixed(1)} min` : `${(s / 3600).toFixed(1)} h`;
  return ` (≈ ${text} at ${chain.block_time_s} s a block)`;
}

function endpointState(chain, rpc) {
  if (rpc.state) return String(rpc.state);
  if (!chain.healthy) return "down";
  return chain.lagging ? "lagging" : "healthy";
}

function endpointDetails(rpc) {
  return Object.entries(rpc)
    .filter(([k]) => k !== "endpoint" && k !== "state")
    .map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`)
    .join("; ");
}

const firstSeen = new Map(); // chain -> {calls, head} when this tab first saw it

function totalCalls(chain) {
  return Object.values(chain.rpc_calls || {}).reduce((a, b) => a + Number(b || 0), 0);
}

// The polling cost since this tab opened: calls made over blocks the head moved.
function callsPerBlock(chain) {
  const calls = totalCalls(chain), head = chain.head_number;
  if (head === null || head === undefined) return "—";
  const first = firstSeen.get(chain.name);
  if (!first) {
    firstSeen.set(chain.name, { calls, head });
    return "measuring";
  }
  const blocks = head - first.head;
  return blocks > 0 ? ((calls - first.calls) / blocks).toFixed(1) : "measuring";
}

export const chains = {
  title: "Chains",
  async load() {
    const list = await get("/v1/chains");
    const overview = table("Followed chains", [
      { head: "Chain", cell: (c) => c.name },
      { head: "Chain id", cell: (c) => String(c.chain_id), num: true },
      { head: "Head", cell: (c) => el("span", { "data-field": "head", text: c.head_number ?? "—" }), num: true },
      { head: "Safe", cell: (c) => tagHeight(c.safe_followed, c.safe_number, "safe"), num: true },
      { head: "Finalized", cell: (c) => tagHeight(c.finalized_followed, c.finalized_number, "finalized"), num: true },
      { head: "State", cell: (c) => (c.healthy ? (c.lagging ? "lagging" : "healthy") : "unhealthy") },
      { head: "Last error", cell: (c) => c.last_error },
      { head: "Finality rule", cell: (c) => `${c.finality}: ${finalityMeaning(c)}${ruleInTime(c)}` },
      { head: "Watched", cell: (c) => String(c.watched), num: true },
      { head: "Calls per block", cell: callsPerBlock, num: true },
    ], list, "no chain is configured.");
    const parts = [overview];
    for (const c of list) {
      parts.push(el("h2", { text: `${c.name}: endpoints` }));
      parts.push(table(`Endpoints of ${c.name}`, [
        { head: "Endpoint", cell: (r) => el("code", { text: r.endpoint }) },
        { head: "State", cell: (r) => endpointState(c, r) },
        { head: "Details", cell: endpointDetails },
      ], c.rpc || []));
      parts.push(el("p", { class: "muted", text: `Heads: ${JSON.stringify(c.heads)}. Calls by method: ${JSON.stringify(c.rpc_calls)}.` }));
    }
    return el("div", {}, parts);
  },
};

export const settlements = {
  title: "Settlements",
  setup(ctx) {
    ctx.filters = { chain: "", verdict: "", kind: "" };
    ctx.cursors = [null]; // the cursor of each page seen, to page back
    const chainBox = el("input", { name: "chain", id: "f-chain", size: 10 });
    const verdictBox = el("select", { name: "verdict", id: "f-verdict" }, el("option", { value: "", text: "any" }),
      VERDICTS.map((v) => el("option", { value: v, text: v })));
    const kindBox = el("input", { name: "kind", id: "f-kind", size: 16, placeholder: "evm_tx, evm_payment" });
    const form = el("form", { class: "filters", on: { submit: (e) => {
      e.preventDefault();
      ctx.filters = { chain: chainBox.value.trim(), verdict: verdictBox.value, kind: kindBox.value.trim() };
      ctx.cursors = [null];
      ctx.reload();
    } } },
    el("label", {}, "Chain", chainBox), el("label", {}, "Verdict", verdictBox), el("label", {}, "Kind", kindBox),
    el("button", { type: "submit", text: "Filter" }));
    return form;
  },
  async load(ctx) {
    const cursor = ctx.cursors[ctx.cursors.length - 1];
    const page = await get("/v1/settlements", { ...ctx.filters, cursor, limit: PAGE_SIZE });
    const rows = table(`Settlements, page ${ctx.cursors.length}`, [
      { head: "Settlement", cell: (s) => settlementLink(s.settlement_id) },
      { head: "Chain", cell: (s) => s.chain },
      { head: "Kind", cell: (s) => s.kind || "evm_tx" },
      { head: "Tx or reference", cell: (s) => (s.tx_hash ? short(s.tx_hash) : s.reference ?? s.ref) },
      { head: "Verdict", cell: (s) => verdict(s.verdict) },
      { head: "Depth (of needed)", cell: (s) => `${s.confirmations ?? 0} (of ${s.required_confirmations ?? "—"})`, num: true },
      { head: "Block", cell: (s) => (s.block_number ?? "—").toString(), num: true },
      { head: "Reorgs", cell: (s) => String(s.reorg_count ?? 0), num: true },
    ], page.items, "no settlement matches.");
    return el("div", {}, rows, pager(ctx, page));
  },
};

// Previous / next over cursor pages: `ctx.cursors` holds the cursor of each page seen.
function pager(ctx, page) {
  const back = el("button", { type: "button", text: "Previous page", disabled: ctx.cursors.length < 2, on: { click: () => {
    ctx.cursors.pop(); ctx.reload();
  } } });
  const next = el("button", { type: "button", text: "Next page", disabled: !page.next_cursor, on: { click: () => {
    ctx.cursors.push(page.next_cursor); ctx.reload();
  } } });
  return el("div", { class: "pager" }, back, next, el("span", { class: "muted", text: `${page.items.length} shown, ${PAGE_SIZE} a page` }));
}

const STEP_WORDS = {
  registered: () => "registered",
  seen_pending: (s) => `pending, not yet included (sender ${s.sender}, nonce ${s.nonce})`,
  reorged: (s) => `reorged (reorg #${s.reorg_id}, depth ${s.depth})${s.finality_violation ? " — FINALITY VIOLATION" : ""}`,
  included: (s) => `included in block ${s.block_number}`,
  depth: (s) => `depth ${s.confirmations}/${s.required}`,
  final: () => "final (FINALITY_CONFIRMED)",
  failed: () => "failed (SETTLEMENT_FAILED)",
  timed_out: () => "timed out (TIMEOUT_TREATED_AS_FAILURE)",
  receipt_issued: (s) => `receipt issued: ${s.kind}`,
  event: (s) => `${s.kind.replaceAll("_", " ")} (${s.severity}, event #${s.event_id})`,
};

function stepWords(step) {
  const words = STEP_WORDS[step.step];
  if (words) return words(step);
  const state = step.state === "dead" ? "dead-lettered" : step.state;
  return `${step.kind || "delivery"} #${step.delivery_id} ${state || step.step}${step.attempts ? ` after ${step.attempts} attempt(s)` : ""}`;
}

function receiptDownload(id, name) {
  const status = el("span", { class: "muted", role: "status" });
  const button = el("button", { type: "button", text: "Download receipt", on: { click: async () => {
    try {
      const text = await getText(`/v1/settlements/${encodeURIComponent(id)}/receipt`);
      const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
      const a = el("a", { href: url, download: name });
      document.body.append(a); a.click(); a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
      status.textContent = ` saved as ${name}`;
    } catch (e) { status.textContent = ` ${e.message}`; }
  } } });
  return el("p", {}, button, status);
}

export const settlement = {
  title: "Settlement",
  async load(ctx) {
    const id = ctx.arg;
    const [view, story, deliveries] = await Promise.all([
      get(`/v1/settlements/${encodeURIComponent(id)}`),
      get(`/v1/settlements/${encodeURIComponent(id)}/timeline`),
      get("/v1/deliveries", { settlement_id: id }),
    ]);
    const steps = story.steps;
    const timeline = el("ol", { class: "timeline", "aria-label": "Timeline" }, steps.map((s) =>
      el("li", { "data-step": s.step }, stepWords(s), el("span", { class: "when", text: when(s.at) }))));
    const depth = steps.filter((s) => s.step === "depth" && s.at !== null);
    const chart = lineChart("Confirmations against time", depth.map((s) => ({ x: s.at, y: s.confirmations })), {
      xLabel: clock, yLabel: String, xName: "block time (UTC)", yName: "confirmations",
    });
    const parts = [
      facts([
        ["Chain", view.chain], ["Kind", view.kind || "evm_tx"], ["Tx hash", view.tx_hash ? el("code", { text: view.tx_hash }) : null],
        ["Reference", view.reference ?? view.ref], ["Verdict", verdict(view.verdict)],
        ["Depth", `${view.confirmations ?? 0} of ${view.required_confirmations}`],
        ["Block", view.block_number === null || view.block_number === undefined ? null : `${view.block_number} ${view.block_hash || ""}`],
        ["Reorgs touching it", String(view.reorg_count ?? 0)],
        ...(view.kind === "evm_payment" ? [["To", view.to], ["Asset", view.asset],
          ["Amount, paid, remaining", `${view.amount}, ${view.paid}, ${view.remaining}${view.overpaid && view.overpaid !== "0" ? ` (overpaid ${view.overpaid})` : ""}`]] : []),
        ["Directive", view.directive],
        ["Registered", when(view.initiated_at)], ["Deadline", when(view.deadline)],
        ["Commit goes to", view.commit_url ? el("code", { text: view.commit_url }) : null],
      ]),
      el("h2", { text: "Timeline" }), timeline,
      depth.length ? chart : el("p", { class: "muted", text: "Confirmations are charted once it is included." }),
      el("h2", { text: "Evidence" }), el("pre", { text: JSON.stringify(view.evidence ?? null, null, 2) }),
      el("h2", { text: "Receipt" }),
    ];
    if (view.receipt) {
      parts.push(el("p", { text: `${view.receipt.kind || "Receipt"}, signed. Check it offline with ` },
        el("code", { text: `finality verify ${id}.receipt.json` }),
        ": the EIP-712 signature and its signer, and for a chain receipt the header chain from the inclusion block to the confirming head and the Merkle-Patricia proofs of the transaction and its receipt (add --signer 0x… to accept only a key you know, --dependent-state FILE to check the state it binds)."));
      parts.push(receiptDownload(id, `${id}.receipt.json`));
    } else {
      parts.push(el("p", { class: "muted", text: "No receipt until the verdict is terminal." }));
    }
    parts.push(el("h2", { text: "Dependent state" }));
    parts.push(view.dependent_state ? el("pre", { text: JSON.stringify(view.dependent_state, null, 2) }) : el("p", { class: "muted", text: "None held." }));
    parts.push(table("Its deliveries", deliveryColumns(false, ctx), deliveries, "none (no commit_url, or nothing to send yet)."));
    return el("div", {}, parts);
  },
};

function deliveryColumns(admin, ctx) {
  const columns = [
    { head: "Id", cell: (d) => `#${d.id}`, num: true },
    { head: "Settlement", cell: (d) => (d.settlement_id ? settlementLink(d.settlement_id) : "(alert)") },
    { head: "Channel", cell: (d) => d.channel },
    { head: "Kind", cell: (d) => d.kind },
    { head: "State", cell: (d) => el("span", { "data-field": "state", text: d.state === "dead" ? "dead (dead-lettered)" : d.state }) },
    { head: "Attempts", cell: (d) => String(d.attempts), num: true },
    { head: "Next attempt", cell: (d) => (d.state === "delivered" ? "—" : when(d.next_attempt_at)) },
    { head: "Last error", cell: (d) => [d.last_status, d.last_error].filter((x) => x !== null && x !== undefined).join(" ") },
    { head: "Delivered", cell: (d) => when(d.delivered_at) },
  ];
  if (admin) columns.push({ head: "Action", cell: (d) => (d.state === "dead" ? replayButton(d, ctx) : "—") });
  return columns;
}

function replayButton(d, ctx) {
  return el("button", { type: "button", class: "replay", "data-delivery": d.id, "aria-label": `Replay delivery ${d.id}`, text: "Replay", on: { click: async (e) => {
    e.target.disabled = true;
    try {
      const row = await post(`/v1/deliveries/${d.id}/replay`, {});
      ctx.say(`Delivery #${row.id} replayed: ${row.state} now.`);
    } catch (err) { ctx.say(err.message); }
    ctx.reload();
  } } });
}

export const deliveries = {
  title: "Deliveries",
  setup(ctx) {
    ctx.state = "";
    const box = el("select", { id: "f-state", name: "state" }, el("option", { value: "", text: "any" }), STATES.map((s) => el("option", { value: s, text: s })));
    box.addEventListener("change", () => { ctx.state = box.value; ctx.reload(); });
    return el("div", { class: "filters" }, el("label", {}, "State", box), el("p", { class: "muted", role: "status", id: "said" }));
  },
  async load(ctx) {
    const [rows, admin] = await Promise.all([get("/v1/deliveries", { state: ctx.state, limit: 200 }), ctx.admin()]);
    const note = admin ? "Your token holds admin: a dead letter can be replayed (the same request as `finality deliveries replay`)."
      : "Replay needs a token with the admin scope.";
    return el("div", {}, el("p", { class: "muted", text: note }), table("The outbox (oldest first, 200 at most)", deliveryColumns(admin, ctx), rows, "the outbox is empty."));
  },
};

export const reorgs = {
  title: "Reorgs",
  async load() {
    const list = await get("/v1/reorgs", { limit: 200 });
    return el("div", {}, table("Reorgs, newest first", [
      { head: "Id", cell: (r) => `#${r.id}`, num: true },
      { head: "Chain", cell: (r) => r.chain },
      { head: "Detected", cell: (r) => when(r.detected_at) },
      { head: "Depth", cell: (r) => el("span", { "data-field": "depth", text: r.depth }), num: true },
      { head: "Common ancestor", cell: (r) => el("span", {}, `${r.common_ancestor.number} `, short(r.common_ancestor.hash)) },
      { head: "Old head → new head", cell: (r) => `${r.old_head.number} → ${r.new_head.number}` },
      { head: "Replaced blocks", cell: (r) => el("span", {}, (r.replaced || []).map((b, i) => [i ? ", " : "",
        el("span", { title: `${b.old_hash} replaced by ${b.new_hash}`, text: String(b.number) })]).flat()) },
      { head: "Touched settlements", cell: (r) => (r.touched.length ? el("span", {}, r.touched.map((id, i) => [i ? ", " : "", settlementLink(id)]).flat()) : "none of yours") },
      { head: "Finality", cell: (r) => (r.finality_violation ? el("strong", { class: "violation", text: "FINALITY VIOLATION" }) : "within the unfinalized range") },
    ], list, "none seen."));
  },
};

async function adminOnly(path, params) {
  try { return await get(path, params); } catch (e) {
    if (e instanceof ApiRefusal && e.status === 403) return { refused: e.message };
    throw e;
  }
}

export const instances = {
  title: "Instances and handoffs",
  async load() {
    const [leases, handoffs] = await Promise.all([adminOnly("/v1/leases"), adminOnly("/v1/handoffs", { limit: 50 })]);
    if (leases.refused) return el("p", { text: `${leases.refused} Leases and handoffs are shown to an admin token.` });
    return el("div", {},
      facts([["This instance", leases.instance_id], ["Handoff", leases.enabled ? "enabled" : "off (one instance)"], ["Fair share", leases.fair_share]]),
      table("Leases", [
        { head: "Name", cell: (x) => x.name }, { head: "Owner", cell: (x) => x.owner },
        { head: "Fencing token", cell: (x) => String(x.token), num: true },
        { head: "Expires", cell: (x) => when(x.expires_at) },
      ], leases.leases || []),
      table("Instances", [
        { head: "Instance", cell: (x) => x.instance_id }, { head: "Alive", cell: (x) => (x.alive ? "alive" : "gone") },
        { head: "Last heartbeat", cell: (x) => when(x.last_heartbeat) }, { head: "Leases", cell: (x) => String(x.leases), num: true },
      ], leases.instances || []),
      table("Takeovers (handoff records), newest first", [
        { head: "Id", cell: (h) => `#${h.id}`, num: true }, { head: "Name", cell: (h) => h.name },
        { head: "From", cell: (h) => `${h.from_owner ?? "—"} (token ${h.from_token ?? "—"})` },
        { head: "To", cell: (h) => `${h.to_owner} (token ${h.to_token})` },
        { head: "Verdict", cell: (h) => el("strong", { text: h.verdict }) }, { head: "Reason", cell: (h) => h.reason },
        { head: "At", cell: (h) => when(h.at) }, { head: "Signed", cell: (h) => (h.signed ? "signed" : "digest only") },
      ], handoffs.refused ? [] : handoffs),
      table("Writes refused for a stale fencing token", [
        { head: "Name", cell: (r) => r.name }, { head: "Writer (token)", cell: (r) => `${r.owner} (${r.token})` },
        { head: "Holder then (token)", cell: (r) => `${r.current_owner ?? "—"} (${r.current_token ?? "—"})` },
        { head: "At", cell: (r) => when(r.at) },
      ], leases.refused_writes || []));
  },
};

const LEASE_WORDS = { held: "held (live)", expired: "expired (not yet taken over)", released: "released" };

// The caller's agents' workflows: who holds each one's lock under which fencing token, until
// when, where each step stands, and what the last lock change (a takeover) was judged.
export const workflows = {
  title: "Agents' workflows",
  setup(ctx) {
    ctx.cursors = [null];
    return "";
  },
  async load(ctx) {
    const cursor = ctx.cursors[ctx.cursors.length - 1];
    const page = await get("/v1/workflows", { cursor, limit: PAGE_SIZE });
    const rows = table(`Your workflows, oldest first, page ${ctx.cursors.length}`, [
      { head: "Workflow", cell: (w) => el("span", {}, w.workflow_id, w.reference ? ` (reference ${w.reference})` : "") },
      { head: "Holder", cell: (w) => el("span", { "data-field": "holder", text: w.holder }) },
      { head: "Fencing token", cell: (w) => String(w.fencing_token), num: true },
      { head: "Lease expires", cell: (w) => (w.lease_expires_at ? when(w.lease_expires_at) : "—") },
      { head: "Lease", cell: (w) => LEASE_WORDS[w.lease_state] || w.lease_state },
      { head: "Steps", cell: (w) => el("ol", { class: "steps" }, (w.steps || []).map((s) => el("li", { text: `${s.name}: ${s.state.replaceAll("_", " ")}` }))) },
      { head: "Last lock change", cell: (w) => (w.verdict ? el("strong", { text: w.verdict }) : "none recorded") },
    ], page.items, "none of yours.");
    return el("div", {}, rows, pager(ctx, page));
  },
};

export const charts = {
  title: "Charts",
  async load() {
    const [stats, list] = await Promise.all([get("/v1/stats/time-to-final", { window_s: 3600 }), get("/v1/reorgs", { limit: 1000 })]);
    const bars = barChart("Time to final per chain, last hour", stats.chains.map((c) => ({
      label: `${c.chain} (${c.count})`, values: [{ name: "median", value: c.median_ms }, { name: "p95", value: c.p95_ms }],
    })), { valueLabel: seconds });
    const depths = lineChart("Reorgs by depth over time", list.map((r) => ({ x: r.detected_at, y: r.depth })).reverse(), {
      xLabel: clock, yLabel: String, xName: "detected (UTC)", yName: "depth", dots: true,
    });
    return el("div", {},
      el("h2", { text: "Time to final (registration to FINALITY_CONFIRMED), last hour" }), bars,
      table("Time to final", [
        { head: "Chain", cell: (c) => c.chain }, { head: "Settlements", cell: (c) => String(c.count), num: true },
        { head: "Median", cell: (c) => seconds(c.median_ms), num: true }, { head: "p95", cell: (c) => seconds(c.p95_ms), num: true },
      ], stats.chains, "no settlement became final in the last hour."),
      el("h2", { text: "Reorgs by depth over time" }), depths,
      el("p", { class: "muted", text: "Confirmations against time are drawn on each settlement's page." }));
  },
};
