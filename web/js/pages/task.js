// pages/task.js: one task (GET /v1/tasks/{id}): its check, its reference source, its
// baselines per GPU, its best kernels by policy (GET /v1/leaderboard?task_id=ID&per=entry)
// and the files of the chosen one (?candidate=ID in the URL, else the best).
import { setQuery } from "../app.js";
import { getJson } from "../api.js";
import { h, fill } from "../dom.js";
import * as fmt from "../format.js";
import { codeBlock } from "../highlight.js";
import { kernelFiles } from "../kernel.js";
import { badge, empty, facts, loadPage, rewardBadge, speedupBar, table } from "../parts.js";

function checkNote(task) {
  const c = task.check || {};
  if (!task.check && task.status !== "checking") {
    // the verdict is its submitters' (they read it with their key); others see the status
    return h("p", { class: "note" }, task.status === "ok" ? "Checked: fit to be optimized." : "The check found this task unfit.");
  }
  if (task.status === "checking") {
    return h("p", { class: "note" }, "This task is being checked. ",
      task.check_job_id ? h("a", { href: `/jobs/${task.check_job_id}` }, "Follow the check") : null);
  }
  if (task.status === "invalid") {
    return h("div", { class: "error-box" }, h("strong", {}, "The check found this task unfit"),
      h("ul", {}, (c.reasons || []).map((r) => h("li", {}, r))));
  }
  const w = Array.isArray(c.window_ms) ? ` (window ${fmt.ms(c.window_ms[0])} – ${fmt.ms(c.window_ms[1])})` : "";
  return h("p", { class: "note" },
    `Checked: deterministic, depends on its inputs, no null candidate passes; eager ${fmt.ms(c.eager_ms)}${w}.`);
}

function baselinesTable(baselines) {
  if (!baselines || !baselines.length) {
    return empty("No baselines measured yet: the first evaluation of a kernel for this task on a GPU measures them.");
  }
  return table([
    { label: "GPU", cls: "col-device", cell: (b) => b.device },
    { label: "Backend", cell: (b) => b.backend },
    { label: "Eager", cls: "num col-eager_ms", cell: (b) => fmt.ms(b.eager_ms) },
    { label: "torch.compile", cls: "num col-compile_ms", cell: (b) => fmt.ms(b.compile_ms) },
    { label: "Measured", cell: (b) => fmt.when(b.measured_at) },
  ], baselines, "data baselines");
}

function kernelsTable(rows, chosen, onChoose) {
  return table([
    { label: "Policy", cls: "col-policy", cell: (r) => r.policy },
    { label: "Model", cls: "col-model", cell: (r) => fmt.text(r.model) },
    { label: "GPU", cls: "col-device", cell: (r) => r.device },
    { label: "Reward", cls: "col-reward", cell: (r) => rewardBadge(r.reward) },
    { label: "vs eager", cls: "col-eager", cell: (r) => speedupBar(r.speedup_vs_eager) },
    { label: "vs torch.compile", cls: "col-compile", cell: (r) => speedupBar(r.speedup_vs_compile) },
    { label: "Kernel", cls: "num col-ms", cell: (r) => fmt.ms(r.candidate_ms) },
    { label: "", cls: "col-actions", cell: (r) => [
      r.candidate_id === chosen
        ? h("span", { class: "muted" }, "shown below")
        : h("a", { href: `?candidate=${r.candidate_id}`, dataset: { candidate: r.candidate_id },
            onclick: (ev) => { ev.preventDefault(); onChoose(r.candidate_id); } }, "files"),
      " · ",
      h("a", { href: `/episodes/${r.episode_id}` }, "trajectory"),
    ] },
  ], rows, "data kernels");
}

export async function render(ctx) {
  document.title = "Task · kforge";
  const got = await loadPage(ctx.view, "task", () =>
    Promise.all([
      getJson(`/v1/tasks/${ctx.id}`),
      getJson("/v1/leaderboard", { task_id: ctx.id, per: "entry", sort: "eager", order: "desc" }),
    ]),
  );
  if (!got) return;
  const [task, board] = got;
  document.title = `${task.name} · kforge`;
  const rows = board.rows;
  let chosen = ctx.query.get("candidate") || (rows[0] && rows[0].candidate_id) || null;
  const kernelsBox = h("div", {});
  const filesBox = h("div", {});
  const choose = (cid) => {
    chosen = cid;
    setQuery({ candidate: cid });
    draw();
  };
  function draw() {
    const none = empty("No verified kernel for this task yet.");
    fill(kernelsBox, rows.length ? kernelsTable(rows, chosen, choose) : none);
    fill(filesBox, chosen ? kernelFiles(chosen) : null);
  }
  fill(ctx.view,
    h("p", { class: "crumbs" }, h("a", { href: "/" }, "Leaderboard"), " / task"),
    h("h1", {}, task.name),
    facts([
      ["Suite", fmt.text(task.suite)],
      ["Backend", task.backend],
      ["Status", badge(task.status)],
      ["Created", fmt.when(task.created_at)],
      ["SHA-256", h("code", {}, task.sha256.slice(0, 16) + "…")],
    ]),
    checkNote(task),
    h("h2", {}, "Best kernels by policy"),
    kernelsBox,
    filesBox,
    h("h2", {}, "Baselines"),
    baselinesTable(task.baselines),
    h("h2", {}, "Reference module"),
    typeof task.source === "string"
      ? codeBlock(task.source, "python")
      : empty("The reference module is not published: only its submitters and episodes published with their sources show it."),
  );
  draw();
}
