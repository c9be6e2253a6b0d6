// pages/job.js: one job (GET /v1/jobs/{id}) followed live through its server-sent events
// (GET /v1/jobs/{id}/events): a status line and a list of events that grow as the worker goes,
// then, after `done`, the result: the episode and its speedups for an optimize job, the
// verdict for an evaluate job, the check for a check_task job. The stream (events.js, with the
// tab's key) is closed at `done` and when the reader leaves.
import { getJson, postJson, storedKey } from "../api.js";
import { followEvents } from "../events.js";
import { downloadLink } from "../kernel.js";
import { h, fill } from "../dom.js";
import * as fmt from "../format.js";
import { badge, errorBox, facts, loadPage, rewardBadge } from "../parts.js";

const KINDS = [
  "queued", "claimed", "building", "verifying", "timing", "turn", "revalidating", "retry", "cancelled", "done",
];
const TITLES = { optimize: "Optimization job", evaluate: "Evaluation job", check_task: "Task check job" };
const FINISHED = new Set(["succeeded", "failed", "cancelled", "dead"]);

function rewardsText(rewards) {
  return (rewards || [])
    .map((r) => {
      const timed = r.correct && typeof r.speedup_vs_eager === "number";
      return `${r.tool} ${r.status}${timed ? `, ${fmt.speedup(r.speedup_vs_eager)} vs eager` : ""}`;
    })
    .join("; ");
}

// What an event says, in words.
function describe(ev) {
  const d = ev.data || {};
  switch (ev.kind) {
    case "queued": return "Queued: waiting for a worker.";
    case "claimed": return `Claimed by ${d.worker || "a worker"}${d.attempt ? ` (attempt ${d.attempt})` : ""}.`;
    case "building": return "Building the kernel.";
    case "verifying": return "Checking correctness on fresh inputs.";
    case "timing": return "Timing against eager and torch.compile.";
    case "turn": {
      const tools = (d.tools || []).join(", ") || "no tool calls";
      const rw = rewardsText(d.rewards);
      return `Turn ${d.idx + 1}: ${tools}${rw ? ` — ${rw}` : ""}${d.malformed ? " (malformed)" : ""}.`;
    }
    case "revalidating": return "Re-validating the best kernel with a fresh secret seed.";
    case "retry": return `Retrying after attempt ${d.attempt}: ${d.reason || "an infrastructure failure"}.`;
    case "cancelled": return "Cancelled.";
    case "done": {
      const reward = d.reward !== undefined ? `reward ${fmt.reward(d.reward)}` : null;
      return `Done: ${[d.status, d.result, reward, d.error].filter(Boolean).join(", ")}.`;
    }
    default: return ev.kind;
  }
}

function optimizeResult(job) {
  const r = job.result || {};
  return [
    facts([
      ["Reward", rewardBadge(r.final_reward)],
      ["vs eager", h("span", { class: "num" }, fmt.speedup(r.speedup_vs_eager))],
      ["vs torch.compile", h("span", { class: "num" }, fmt.speedup(r.speedup_vs_compile))],
      ["End", fmt.text(r.end_reason)],
      ["Turns", fmt.count(r.n_turns)],
      ["Device", fmt.text(job.device)],
    ]),
    r.end_detail ? h("p", { class: "note" }, r.end_detail) : null,
    h("p", { class: "actions" },
      r.episode_id ? h("a", { class: "button", href: `/episodes/${r.episode_id}` }, "Open the episode") : null,
      r.best_candidate_id
        ? downloadLink(`/v1/candidates/${r.best_candidate_id}/download`, "", "Download the kernel", "button secondary")
        : null,
      h("a", { href: `/tasks/${job.task_id}` }, "Open the task")),
  ];
}

function evaluateResult(job) {
  const v = job.result || {};
  const t = v.timing || {};
  return [
    facts([
      ["Verdict", badge(v.status)],
      ["Correct", v.correct === true ? "yes" : v.correct === false ? "no" : fmt.NONE],
      ["Reward", rewardBadge(v.reward)],
      ["vs eager", fmt.speedup(v.speedup_vs_eager)],
      ["vs torch.compile", fmt.speedup(v.speedup_vs_compile)],
      ["Kernel", fmt.ms(t.candidate && t.candidate.median_ms)],
      ["Eager", fmt.ms(t.eager && t.eager.median_ms)],
      ["torch.compile", fmt.ms(t.compile && t.compile.median_ms)],
      ["Flags", v.flags && v.flags.length ? v.flags.join(", ") : fmt.NONE],
      ["Device", fmt.text(job.device)],
    ]),
    v.message ? h("pre", { class: "text" }, String(v.message)) : null,
    h("p", {}, h("a", { href: `/tasks/${job.task_id}` }, "Open the task")),
  ];
}

function checkResult(job) {
  const v = job.result || {};
  return [
    facts([["Fit", v.fit ? "yes" : "no"], ["Eager", fmt.ms(v.eager_ms)]]),
    v.reasons && v.reasons.length ? h("ul", {}, v.reasons.map((r) => h("li", {}, r))) : null,
    h("p", {}, h("a", { href: `/tasks/${job.task_id}` }, "Open the task")),
  ];
}

function resultView(job) {
  if (job.status === "cancelled") return h("p", { class: "note" }, "The job was cancelled.");
  if (job.status !== "succeeded") {
    const why = (job.error && (job.error.reason || job.error.message)) || "no reason recorded";
    return h("div", { class: "error-box" }, h("strong", {}, `The job ${job.status}`), h("p", {}, why));
  }
  if (job.kind === "optimize") return optimizeResult(job);
  if (job.kind === "evaluate") return evaluateResult(job);
  return checkResult(job);
}

function eventItem(ev, text) {
  return h("li", { class: "event", dataset: { kind: ev.kind, seq: ev.seq } },
    h("time", { datetime: ev.at }, fmt.clock(ev.at)), " ",
    h("span", { class: "event-kind" }, ev.kind), " ",
    h("span", { class: "event-text" }, text));
}

// POST /v1/jobs/{id}/cancel with the key this tab holds; the events then tell how it ended.
function cancelButton(id, box) {
  const cancel = async (ev) => {
    ev.target.disabled = true;
    try {
      await postJson(`/v1/jobs/${id}/cancel`, {}, storedKey());
    } catch (err) {
      fill(box, errorBox(err, "The job could not be cancelled"));
    }
  };
  return h("button", { type: "button", class: "secondary cancel", onclick: cancel }, "Cancel the job");
}

function jobFacts(job) {
  return facts([
    ["Kind", job.kind],
    ["Backend", job.backend],
    ["Task", h("a", { href: `/tasks/${job.task_id}` }, job.task_id.slice(0, 8))],
    ["Created", fmt.when(job.created_at)],
    ["Attempt", String(job.attempt)],
    job.episode_id ? ["Episode", h("a", { class: "episode-link", href: `/episodes/${job.episode_id}` }, job.episode_id.slice(0, 8))] : null,
  ]);
}

export async function render(ctx) {
  document.title = "Job · kforge";
  let job = await loadPage(ctx.view, "job", () => getJson(`/v1/jobs/${ctx.id}`));
  if (!job) return;
  document.title = `Job ${job.kind} · kforge`;
  const status = h("span", { class: "status-word" });
  const phase = h("span", { class: "phase" });
  const line = h("p", { class: "status-line", role: "status", "aria-live": "polite" }, status, phase);
  const events = h("ol", { class: "events" });
  const result = h("section", { class: "job-result", "aria-label": "Result" });
  const cancel = h("p", { class: "actions" });
  const about = h("div", {}, jobFacts(job));
  const setStatus = (word, text) => {
    fill(status, badge(word));
    phase.textContent = text ? ` ${text}` : "";
    line.dataset.status = word;
  };
  fill(ctx.view,
    h("p", { class: "crumbs" }, h("a", { href: "/" }, "Leaderboard"), " / job"),
    h("h1", {}, TITLES[job.kind] || "Job"),
    line,
    about,
    cancel,
    h("h2", {}, "Events"),
    events,
    h("h2", {}, "Result"),
    result,
  );
  setStatus(job.status, FINISHED.has(job.status) ? "" : "waiting for events…");
  const waiting = FINISHED.has(job.status) ? "Loading the result…" : "The result appears here when the job is done.";
  fill(result, h("p", { class: "note" }, waiting));

  const showResult = async () => {
    try {
      job = await getJson(`/v1/jobs/${ctx.id}`);
    } catch (err) {
      fill(result, errorBox(err, "The result could not be loaded"));
      return;
    }
    setStatus(job.status, "");
    fill(about, jobFacts(job));
    fill(cancel);
    fill(result, resultView(job));
  };

  if (!FINISHED.has(job.status) && storedKey()) fill(cancel, cancelButton(job.id, cancel));

  let last = 0;
  let stream = null;
  const onEvent = (msg) => {
    let ev;
    try {
      ev = JSON.parse(msg.data);
    } catch {
      return;
    }
    if (ev.seq <= last) return;
    last = ev.seq;
    const text = describe(ev);
    events.append(eventItem(ev, text));
    if (ev.kind === "done") {
      stream.close();
      showResult();
    } else if (ev.kind === "queued" || ev.kind === "retry") {
      setStatus("queued", text);
    } else if (ev.kind !== "cancelled") {
      setStatus("running", text);
    }
  };
  const onEnd = (status) => {
    if (last && status === 0) return; // the stream ended after its events (done)
    phase.textContent = " The event stream closed: reload to follow again.";
  };
  stream = followEvents(`/v1/jobs/${ctx.id}/events`, (ev) => {
    if (KINDS.includes(ev.event)) onEvent(ev);
  }, onEnd);
  ctx.onLeave(() => stream.close());
}
