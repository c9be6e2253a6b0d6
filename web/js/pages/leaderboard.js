// pages/leaderboard.js: GET /v1/leaderboard as a table, with filter selects filled from the
// API's facets, a best-per-task / every-entry switch, sortable columns and the API's summary.
// The API ranks and summarises; this page only shows what it got. The filters, the switch and
// the sort live in the URL's query string, so a link or a reload keeps them.
import { setQuery } from "../app.js";
import { getJson } from "../api.js";
import { h, fill } from "../dom.js";
import * as fmt from "../format.js";
import { empty, errorBox, loading, rewardBadge, speedupBar, table } from "../parts.js";

const FILTERS = [
  ["device", "GPU", "devices"],
  ["policy", "Policy", "policies"],
  ["model", "Model", "models"],
  ["suite", "Suite", "suites"],
  ["backend", "Backend", "backends"],
];
const DEFAULTS = { per: "task", sort: "eager", order: "desc" };
const KEYS = [...FILTERS.map((f) => f[0]), "per", "sort", "order"];

function readState(query) {
  const state = { ...DEFAULTS };
  for (const k of KEYS) if (query.get(k)) state[k] = query.get(k);
  return state;
}

// The state without its defaults: what goes into the URL.
function urlParams(state) {
  const out = {};
  for (const k of KEYS) if (state[k] && state[k] !== DEFAULTS[k]) out[k] = state[k];
  return out;
}

function filterSelect(name, label, values, current, onChange) {
  const options = [...(values || [])];
  if (current && !options.includes(current)) options.push(current);
  const select = h("select", { id: `filter-${name}`, name, onchange: () => onChange(name, select.value) },
    h("option", { value: "" }, "any"),
    options.map((v) => h("option", { value: v, selected: v === current }, v)),
  );
  return h("label", { class: "field" }, h("span", {}, label), select);
}

function perSwitch(per, onChange) {
  const button = (value, label) =>
    h("button", { type: "button", class: "seg", "aria-pressed": per === value ? "true" : "false",
      dataset: { per: value }, onclick: () => onChange("per", value) }, label);
  return h("div", { class: "segmented", role: "group", "aria-label": "Rows" },
    button("task", "Best per task"),
    button("entry", "Every entry"),
  );
}

function summaryBox(sum) {
  const stat = (key, label, value) =>
    h("div", { class: "stat", dataset: { stat: key } },
      h("span", { class: "stat-value num" }, value),
      h("span", { class: "stat-label" }, label));
  return [
    h("div", { class: "stats" },
      stat("entries", "entries", fmt.count(sum.entries)),
      stat("tasks", "tasks", fmt.count(sum.tasks)),
      stat("geomean_speedup_vs_eager", "geomean vs eager", fmt.speedup(sum.geomean_speedup_vs_eager)),
      stat("geomean_speedup_vs_compile", "geomean vs compile", fmt.speedup(sum.geomean_speedup_vs_compile)),
      stat("share_faster_than_eager", "faster than eager", fmt.percent(sum.share_faster_than_eager)),
      stat("share_faster_than_compile", "faster than compile", fmt.percent(sum.share_faster_than_compile)),
    ),
    h("p", { class: "hint" },
      "Geometric means over the rows below; “faster” is more than 5% faster. Compile is torch.compile."),
  ];
}

// A column header; sortable ones are buttons that set sort (and flip order when already it).
function header(label, cls, sortKey, state, onSort) {
  if (!sortKey) return h("th", { class: cls, scope: "col" }, label);
  const active = state.sort === sortKey;
  const arrow = active ? (state.order === "asc" ? " ▲" : " ▼") : "";
  const aria = active ? (state.order === "asc" ? "ascending" : "descending") : "none";
  return h("th", { class: `${cls} sortable`, scope: "col", "aria-sort": aria },
    h("button", { type: "button", dataset: { sort: sortKey }, onclick: () => onSort(sortKey) }, label, arrow),
  );
}

function rowsTable(rows, state, onSort) {
  const col = (label, cls, cell, sortKey) => ({ cls, cell, head: header(label, cls, sortKey, state, onSort) });
  const columns = [
    col("#", "col-rank num", (r) => r.rank),
    col("Task", "col-task", (r) => h("a", { href: `/tasks/${r.task_id}` }, r.task_name), "task"),
    col("Suite", "col-suite", (r) => fmt.text(r.suite)),
    col("GPU", "col-device", (r) => fmt.text(r.device)),
    col("Policy", "col-policy", (r) => fmt.text(r.policy)),
    col("Model", "col-model", (r) => fmt.text(r.model)),
    col("Reward", "col-reward", (r) => rewardBadge(r.reward), "reward"),
    col("vs eager", "col-eager", (r) => speedupBar(r.speedup_vs_eager), "eager"),
    col("vs torch.compile", "col-compile", (r) => speedupBar(r.speedup_vs_compile), "compile"),
    col("Kernel", "col-ms num", (r) => fmt.ms(r.candidate_ms)),
    col("Finished (UTC)", "col-finished", (r) => fmt.shortWhen(r.finished_at), "recent"),
    col("", "col-episode", (r) => h("a", { href: `/episodes/${r.episode_id}` }, "trajectory")),
  ];
  return table(columns, rows, "data leaderboard");
}

export async function render(ctx) {
  document.title = "Leaderboard · kforge";
  const state = readState(ctx.query);
  const controls = h("div", { class: "controls" });
  const summary = h("section", { class: "summary", "aria-label": "Summary" });
  const results = h("section", { class: "results" }, loading("the leaderboard"));
  fill(ctx.view,
    h("h1", {}, "Leaderboard"),
    h("p", { class: "lead" },
      "Verified kernels and their speedups over PyTorch eager and torch.compile, re-checked with a fresh secret seed."),
    controls,
    summary,
    results,
  );
  let seq = 0;

  const change = (key, value) => {
    state[key] = value;
    setQuery(urlParams(state));
    load();
  };
  const onSort = (key) => {
    if (state.sort === key) state.order = state.order === "asc" ? "desc" : "asc";
    else state.order = key === "task" ? "asc" : "desc";
    state.sort = key;
    setQuery(urlParams(state));
    load();
  };

  function draw(data) {
    const filtered = FILTERS.some(([k]) => state[k]);
    fill(controls,
      h("div", { class: "filters" },
        FILTERS.map(([k, label, facet]) => filterSelect(k, label, data.facets[facet], state[k], change))),
      perSwitch(state.per, change),
      filtered ? h("a", { class: "clear", href: state.per === "task" ? "/leaderboard" : "/leaderboard?per=entry" },
        "clear filters") : null,
    );
    fill(summary, summaryBox(data.summary));
    if (!data.rows.length) {
      fill(results, filtered
        ? empty("No entries match these filters.")
        : empty("No verified kernels yet: ", h("a", { href: "/submit" }, "submit a module"), "."));
      return;
    }
    const what = state.per === "task" ? "tasks, each with its best entry" : "entries, one per task × GPU × policy × model";
    const cut = data.rows.length >= data.filter.limit ? " (the first ones: narrow the filters for the others)" : "";
    fill(results, rowsTable(data.rows, state, onSort), h("p", { class: "note" }, `${data.rows.length} ${what}${cut}.`));
  }

  // Asks the API for the current state; an answer to an older request is dropped.
  async function load() {
    const mine = ++seq;
    results.setAttribute("aria-busy", "true");
    try {
      const data = await getJson("/v1/leaderboard", state);
      if (mine === seq) draw(data);
    } catch (err) {
      if (mine === seq) fill(results, errorBox(err, "The leaderboard could not be loaded"));
    } finally {
      if (mine === seq) results.removeAttribute("aria-busy");
    }
  }

  await load();
}
