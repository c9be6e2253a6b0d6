// format.js: how every page writes numbers, times and dates, so they read the same everywhere.

export const NONE = "—";

function isNum(x) {
  return typeof x === "number" && Number.isFinite(x);
}

// 1.234 -> "1.23×"
export function speedup(x) {
  return isNum(x) ? `${x.toFixed(2)}×` : NONE;
}

// milliseconds -> "1.23 s", "12.3 ms", "1.23 ms", "456 µs", "12.3 µs"
export function ms(x) {
  if (!isNum(x)) return NONE;
  if (x >= 1000) return `${(x / 1000).toFixed(2)} s`;
  if (x >= 1) return `${x.toFixed(x >= 100 ? 0 : x >= 10 ? 1 : 2)} ms`;
  const us = x * 1000;
  return `${us.toFixed(us >= 100 ? 0 : 1)} µs`;
}

// a fraction 0..1 -> "66.7%" (one decimal, none when whole)
export function percent(f) {
  return isNum(f) ? `${Number((f * 100).toFixed(1))}%` : NONE;
}

// a reward (-1, 1, 2, 3) -> "3", "−1"
export function reward(r) {
  if (!isNum(r)) return NONE;
  return r < 0 ? `−${Math.abs(r)}` : String(r);
}

export function count(n) {
  return isNum(n) ? n.toLocaleString("en-US") : NONE;
}

// RFC 3339 -> "2026-03-04 05:06 UTC"
export function when(iso) {
  if (!iso) return NONE;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

// RFC 3339 -> "2026-03-04 05:06" (UTC), where a column is short of room
export function shortWhen(iso) {
  return when(iso).replace(" UTC", "");
}

// seconds -> "42 s", "3 min 5 s"
export function seconds(x) {
  if (!isNum(x)) return NONE;
  if (x < 60) return `${x < 10 ? x.toFixed(1) : Math.round(x)} s`;
  return `${Math.floor(x / 60)} min ${Math.round(x % 60)} s`;
}

// Some text, or the dash when it is empty.
export function text(x) {
  return x === null || x === undefined || x === "" ? NONE : String(x);
}

// RFC 3339 -> "05:06:07" (UTC), for events of one job
export function clock(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? NONE : d.toISOString().slice(11, 19);
}
