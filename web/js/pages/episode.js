// pages/episode.js: one agent episode (GET /v1/episodes/{id}): who ran it and how it ended,
// a chart of the best correct speedup over eager so far, turn by turn, the trajectory itself
// and the best kernel. A running episode is followed live on its job's page.
import { getJson } from "../api.js";
import { h, fill } from "../dom.js";
import { stepChart } from "../chart.js";
import * as fmt from "../format.js";
import { kernelFiles } from "../kernel.js";
import { badge, empty, facts, loadPage, rewardBadge } from "../parts.js";
import { turnView } from "../turns.js";

const LIVE = new Set(["queued", "running"]);

// The points where the best correct speedup vs eager so far went up: [{x: turn, y, title}].
function bestSoFar(turns) {
  const out = [];
  let best = null;
  for (const t of turns) {
    for (const r of t.rewards || []) {
      const s = r.speedup_vs_eager;
      if (r.correct === true && typeof s === "number" && (best === null || s > best)) {
        best = s;
        out.push({ x: t.idx + 1, y: s, title: `turn ${t.idx + 1}: ${r.tool} ${fmt.speedup(s)} vs eager` });
      }
    }
  }
  return out;
}

function policyText(p) {
  return p.model ? `${p.name} · ${p.model}` : p.name;
}

function header(ep, task) {
  const res = ep.result || {};
  const env = ep.env || {};
  return facts([
    ["Task", h("a", { href: `/tasks/${ep.task_id}` }, task ? task.name : ep.task_id)],
    ["Policy", policyText(ep.policy)],
    ["Status", badge(ep.status)],
    ["End", fmt.text(ep.end_reason)],
    ep.end_detail ? ["Why", h("span", { class: "end-detail" }, ep.end_detail)] : null,
    ["Reward", rewardBadge(res.reward)],
    ["vs eager", h("span", { class: "num" }, fmt.speedup(res.speedup_vs_eager))],
    ["vs torch.compile", h("span", { class: "num" }, fmt.speedup(res.speedup_vs_compile))],
    ["Device", fmt.text(res.device || env.gpu || env.device)],
    ["Turns", fmt.count(ep.n_turns)],
    ["Tokens", `${fmt.count(ep.tokens.prompt)} in · ${fmt.count(ep.tokens.completion)} out`],
    ["Backend", ep.backend],
    ["Finished", fmt.when(ep.finished_at)],
    ["Job", h("a", { href: `/jobs/${ep.job_id}` }, ep.job_id.slice(0, 8))],
  ], "facts episode-facts");
}

function chart(ep, turns) {
  const points = bestSoFar(turns);
  if (!points.length) return empty("No correct kernel was measured in this episode yet.");
  const last = points[points.length - 1];
  return stepChart({
    points,
    xMin: 1,
    xMax: Math.max(ep.n_turns, turns.length),
    xLabel: "turn",
    yLabel: "speedup vs eager",
    ref: 1,
    refLabel: "eager (1×)",
    format: (y) => `${+y.toFixed(2)}×`,
    caption: `Best correct speedup over eager so far: ${fmt.speedup(last.y)} by turn ${last.x}.`,
  });
}

export async function render(ctx) {
  document.title = "Episode · kforge";
  const ep = await loadPage(ctx.view, "episode", () => getJson(`/v1/episodes/${ctx.id}`));
  if (!ep) return;
  const task = { name: ep.task_name };
  document.title = `Episode · ${task ? task.name : "task"} · kforge`;
  const turns = ep.turns || [];
  fill(ctx.view,
    h("p", { class: "crumbs" }, h("a", { href: "/" }, "Leaderboard"), " / ",
      h("a", { href: `/tasks/${ep.task_id}` }, task ? task.name : "task"), " / episode"),
    h("h1", {}, `Episode of ${task ? task.name : "a task"}`),
    header(ep, task),
    LIVE.has(ep.status)
      ? h("p", { class: "note" }, "This episode is still running: ",
          h("a", { href: `/jobs/${ep.job_id}` }, "follow it live"), ".")
      : null,
    h("h2", {}, "Best speedup over the turns"),
    h("section", { class: "chart-section", "aria-label": "Best speedup over the turns" }, chart(ep, turns)),
    h("h2", {}, "Trajectory"),
    h("div", { class: "turns" }, turns.length ? turns.map(turnView)
      : empty(ep.turns ? "No turns yet." : "The trajectory is not published: its owner published the results only.")),
    h("h2", {}, "Best kernel"),
    !ep.best_candidate_id ? empty("No correct kernel.")
      : ep.turns ? kernelFiles(ep.best_candidate_id)
        : empty("The kernel's files are not published: its owner published the results only."),
  );
}
