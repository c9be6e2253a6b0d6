// api.js: the public API over fetch. Every failure becomes an ApiError carrying the API's one
// error shape ({"error": {code, name, message, field?, request_id}}), or a stand-in for it
// when the server could not be reached or answered something else. Every request carries the
// key this tab holds (storedKey), when it holds one: its owner's private jobs, episodes and
// kernels are found only with it (anyone else gets 404); published ones need none.

export class ApiError extends Error {
  constructor(status, err) {
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code ?? null;
    this.errorName = err.name || "http_error";
    this.field = err.field || null;
    this.requestId = err.request_id || null;
  }
}

// "/v1/leaderboard" + {device: "x", model: ""} -> "/v1/leaderboard?device=x" (empty values left out)
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== null && v !== undefined && v !== "") q.set(k, String(v));
  }
  const text = q.toString();
  return text ? `${path}?${text}` : path;
}

// The headers of a request: extra, and the stored key as a bearer token unless key says otherwise.
function withKey(extra, key = storedKey()) {
  const headers = { ...extra };
  if (key) headers.Authorization = `Bearer ${key}`;
  return headers;
}

// fetch() with the stored key; failures to connect become an ApiError. Returns the Response.
export async function fetchWithKey(path, options = {}) {
  try {
    return await fetch(path, { ...options, headers: withKey(options.headers || {}) });
  } catch {
    throw new ApiError(0, { name: "unreachable", message: "The server could not be reached." });
  }
}

async function request(path, options) {
  let resp;
  try {
    const { key, headers, ...rest } = options;
    resp = await fetch(path, { ...rest, headers: withKey(headers || { Accept: "application/json" }, key) });
  } catch {
    throw new ApiError(0, { name: "unreachable", message: "The server could not be reached." });
  }
  let body = null;
  try {
    body = await resp.json();
  } catch {
    body = null;
  }
  if (resp.ok && body !== null) return body;
  if (body && body.error) throw new ApiError(resp.status, body.error);
  throw new ApiError(resp.status, { message: `The server answered HTTP ${resp.status}.` });
}

// A GET with the stored key; when the API refuses that key (revoked, mistyped: 401, 403), once
// more without it, so that published pages still read.
export async function getJson(path, params) {
  const url = withQuery(path, params);
  try {
    return await request(url, { method: "GET" });
  } catch (err) {
    if (!storedKey() || (err.status !== 401 && err.status !== 403)) throw err;
    return request(url, { method: "GET", key: "" });
  }
}

// POST with a JSON body and `Authorization: Bearer key` (left out when key is empty).
export function postJson(path, body, key) {
  const headers = { Accept: "application/json", "Content-Type": "application/json" };
  return request(path, { method: "POST", headers, key: key || "", body: JSON.stringify(body) });
}

// The API key the reader typed on the submit page, kept for this tab only (sessionStorage).
const KEY_SLOT = "kforge.apiKey";

export function storedKey() {
  try {
    return sessionStorage.getItem(KEY_SLOT) || "";
  } catch {
    return "";
  }
}

export function storeKey(key) {
  try {
    if (key) sessionStorage.setItem(KEY_SLOT, key);
    else sessionStorage.removeItem(KEY_SLOT);
  } catch {
    // storage refused (private mode): the key just is not remembered
  }
}
