// The API as the console calls it: every request carries the tab's bearer token (kept in
// sessionStorage: never in a URL, a cookie or a log) and every answer is JSON.

const TOKEN_KEY = "finality.token";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function authHeaders(extra = {}) {
  const headers = { Accept: "application/json", ...extra };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  return headers;
}

// An answer the API refused, with what it said (the error shape's `error` line).
export class ApiRefusal extends Error {
  constructor(status, body) {
    const said = body && typeof body.error === "string" ? body.error : `HTTP ${status}`;
    super(explain(status, said));
    this.status = status;
    this.body = body;
  }
}

function explain(status, said) {
  if (status === 401) return `Not signed in (401): ${said}. Paste a token with the read scope above.`;
  if (status === 403) return `Not allowed (403): ${said}.`;
  return `${said} (HTTP ${status})`;
}

async function answer(response) {
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch { body = { error: text.slice(0, 200) }; }
  if (!response.ok) throw new ApiRefusal(response.status, body);
  return body;
}

export async function get(path, params = {}) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") query.set(k, v);
  const q = query.toString();
  return answer(await fetch(q ? `${path}?${q}` : path, { headers: authHeaders(), cache: "no-store" }));
}

export async function getText(path) {
  const response = await fetch(path, { headers: authHeaders(), cache: "no-store" });
  if (!response.ok) return answer(response);
  return response.text();
}

export async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: authHeaders({ "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  });
  return answer(response);
}

// Whether this token holds `admin` (replay, handoffs, leases): asked of an admin-only read,
// so the page never guesses from the token itself.
export async function isAdmin() {
  try {
    await get("/v1/leases");
    return true;
  } catch (e) {
    if (e instanceof ApiRefusal && (e.status === 403 || e.status === 401)) return false;
    throw e;
  }
}
