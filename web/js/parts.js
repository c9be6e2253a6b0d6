// parts.js: the pieces several pages share: loading and empty notes, the error box, status
// badges, speedup bars, fact lists, tables and folded long texts.
import { h, fill } from "./dom.js";
import * as fmt from "./format.js";

export function loading(what) {
  return h("p", { class: "note loading", role: "status", "aria-busy": "true" }, `Loading ${what}…`);
}

export function empty(text, ...more) {
  return h("p", { class: "note empty" }, text, ...more);
}

// The API's error, readably: its message, its name and code, the field to blame, the request id.
export function errorBox(err, title = "Something went wrong") {
  const facts = [
    err.errorName ? `${err.errorName}${err.code ? ` (${err.code})` : ""}` : null,
    err.status ? `HTTP ${err.status}` : null,
    err.field ? `field: ${err.field}` : null,
    err.requestId ? `request ${err.requestId}` : null,
  ].filter(Boolean);
  return h("div", { class: "error-box", role: "alert" },
    h("strong", {}, title),
    h("p", { class: "error-message" }, err.message || String(err)),
    facts.length ? h("p", { class: "error-facts" }, facts.join(" · ")) : null,
  );
}

// A status word as a coloured badge: good (succeeded, finished, ok), bad, or neutral.
const GOOD = new Set(["succeeded", "finished", "ok", "submitted", "fit"]);
const BAD = new Set(["failed", "dead", "invalid", "cancelled", "error", "incorrect", "compile_error"]);
export function badge(word) {
  const kind = GOOD.has(word) ? "good" : BAD.has(word) ? "bad" : "neutral";
  return h("span", { class: `badge badge-${kind}` }, fmt.text(word));
}

// A reward as a badge: 3 and 2 good, 1 neutral, -1 bad.
export function rewardBadge(r) {
  const kind = r >= 2 ? "good" : r === 1 ? "neutral" : r === null || r === undefined ? "none" : "bad";
  return h("span", { class: `badge reward badge-${kind}` }, fmt.reward(r));
}

// A speedup as a bar on a log scale around 1× (right and green when faster, left and red
// when slower; 4× or 1/4× fills the half) with the number beside it.
export function speedupBar(x) {
  const cell = h("span", { class: "bar-cell" });
  const track = h("span", { class: "bar-track", "aria-hidden": "true" });
  if (typeof x === "number" && x > 0) {
    const half = Math.max(Math.min(Math.abs(Math.log2(x)) / 2, 1) * 50, 2);
    const bar = h("span", { class: `bar ${x >= 1 ? "bar-up" : "bar-down"}` });
    bar.style.width = `${half}%`;
    if (x >= 1) bar.style.left = "50%";
    else bar.style.right = "50%";
    track.append(bar);
  } else {
    track.classList.add("bar-none");
  }
  cell.append(track, h("span", { class: "bar-value num" }, fmt.speedup(x)));
  return cell;
}

// A <dl> of [label, value] pairs (null pairs, and pairs whose value is null, are left out).
export function facts(pairs, cls = "facts") {
  return h("dl", { class: cls },
    pairs
      .filter((pair) => pair && pair[1] !== null && pair[1] !== undefined)
      .map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))),
  );
}

// A table: columns [{label, cls?, cell(row) -> node|text, head?: node}], rows.
export function table(columns, rows, cls = "data") {
  return h("div", { class: "table-wrap" },
    h("table", { class: cls },
      h("thead", {},
        h("tr", {}, columns.map((c) => c.head || h("th", { class: c.cls, scope: "col" }, c.label)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, columns.map((c) => h("td", { class: c.cls }, c.cell(r)))))),
    ),
  );
}

// Text in a <pre>, folded into a <details> when it is long (more than `lines` lines or
// `chars` characters), its summary saying how long.
export function folded(text, { lines = 14, chars = 1200, label = "output", node = null } = {}) {
  const body = node || h("pre", { class: "text" }, text);
  const n = text.split("\n").length;
  if (n <= lines && text.length <= chars) return body;
  return h("details", { class: "fold" },
    h("summary", {}, `${label}: ${fmt.count(n)} lines, ${fmt.count(text.length)} characters`),
    body,
  );
}

// A page's first load: "Loading WHAT…" in view while load() runs; its result, or null after the
// API's error was shown in view (the page's title then says what went wrong).
export async function loadPage(view, what, load) {
  fill(view, loading(`the ${what}`));
  try {
    return await load();
  } catch (err) {
    document.title = `${err.status === 404 ? "Not found" : "Error"} · kforge`;
    fill(view,
      errorBox(err, `The ${what} could not be loaded`),
      h("p", {}, h("a", { href: "/" }, "Back to the leaderboard")));
    return null;
  }
}
