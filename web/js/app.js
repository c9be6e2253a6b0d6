// app.js: the router. It maps location.pathname to a page module (loaded on first use), gives
// the page a fresh container inside <main>, and turns clicks on in-app links into
// history.pushState, so moving between pages loads no HTML. A page's render(ctx) gets
// ctx = {view, id, query, onLeave(fn)}; the functions given to onLeave run when the reader
// leaves the page (the job page closes its event stream there).
import { h, fill } from "./dom.js";

const UUID = "([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
const ROUTES = [
  [/^\/(?:leaderboard)?$/, "leaderboard", "/"],
  [/^\/submit$/, "submit", "/submit"],
  [new RegExp(`^/tasks/${UUID}$`), "task", null],
  [new RegExp(`^/episodes/${UUID}$`), "episode", null],
  [new RegExp(`^/jobs/${UUID}$`), "job", null],
];

let leaving = [];

function match(path) {
  for (const [re, page, nav] of ROUTES) {
    const m = re.exec(path);
    if (m) return { page, id: m[1] || null, nav };
  }
  return null;
}

function notFound(view) {
  document.title = "Not found · kforge";
  fill(view,
    h("h1", {}, "Page not found"),
    h("p", {}, "There is no page at ", h("code", {}, location.pathname), "."),
    h("p", {}, h("a", { href: "/" }, "Back to the leaderboard")),
  );
}

async function show() {
  for (const fn of leaving) fn();
  leaving = [];
  const main = document.querySelector("main");
  const view = h("div", { class: "view" });
  fill(main, view);
  const found = match(location.pathname);
  for (const a of document.querySelectorAll("header nav a")) {
    if (found && a.getAttribute("href") === found.nav) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!found) return notFound(view);
  const ctx = {
    view,
    id: found.id,
    query: new URLSearchParams(location.search),
    onLeave: (fn) => leaving.push(fn),
  };
  const mod = await import(`./pages/${found.page}.js`);
  if (view.isConnected) await mod.render(ctx);
}

// Goes to url inside the app (a new history entry unless replace).
export function navigate(url, { replace = false } = {}) {
  history[replace ? "replaceState" : "pushState"](null, "", url);
  window.scrollTo(0, 0);
  return show();
}

// Changes the query string of the page in place, without rendering it again.
export function setQuery(params, { replace = false } = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
  const url = location.pathname + (q.toString() ? `?${q}` : "");
  history[replace ? "replaceState" : "pushState"](null, "", url);
}

document.addEventListener("click", (ev) => {
  const a = ev.target.closest("a[href]");
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  if (a.target || a.hasAttribute("download") || a.origin !== location.origin || !match(a.pathname)) return;
  ev.preventDefault();
  navigate(a.pathname + a.search);
});
window.addEventListener("popstate", show);
show();
