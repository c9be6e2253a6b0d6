// turns.js: one turn of an episode as the reader sees it: the policy's message, each tool call
// (its name, its arguments) beside the tool's answer, long texts folded, and the reward
// components of its verify / profile / submit calls as a small table.
import { h } from "./dom.js";
import * as fmt from "./format.js";
import { codeBlock, languageOf } from "./highlight.js";
import { badge, folded, rewardBadge, table } from "./parts.js";

function messageText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((p) => (p && typeof p.text === "string" ? p.text : "")).join("\n");
  }
  return "";
}

// A call's arguments: a file write shows its path and highlighted content, a shell command
// its command line, anything else the JSON, indented.
function argumentsView(name, raw) {
  let args;
  try {
    args = JSON.parse(raw);
  } catch {
    return folded(String(raw ?? ""), { label: "arguments" });
  }
  if (args && typeof args === "object" && typeof args.content === "string" && typeof args.path === "string") {
    const lang = languageOf(args.path);
    return h("div", { class: "args" },
      h("code", { class: "path" }, args.path),
      folded(args.content, { label: args.path, node: codeBlock(args.content, lang) }));
  }
  if (args && typeof args === "object" && typeof args.command === "string" && Object.keys(args).length === 1) {
    const node = h("pre", { class: "text shell" }, `$ ${args.command}`);
    return folded(args.command, { label: "command", node });
  }
  if (args && typeof args === "object" && !Object.keys(args).length) return null;
  const text = JSON.stringify(args, null, 2);
  return folded(text, { label: "arguments" });
}

function callView(call, results) {
  const fn = call.function || {};
  const result = results.find((m) => m.tool_call_id === call.id);
  const out = result ? messageText(result.content) : null;
  return h("div", { class: "call", dataset: { tool: fn.name || "" } },
    h("div", { class: "call-head" }, h("span", { class: "tool-name" }, fn.name || "(no name)")),
    argumentsView(fn.name, fn.arguments),
    out === null
      ? h("p", { class: "muted" }, "no answer recorded")
      : h("div", { class: "result" },
          h("span", { class: "result-label" }, "→"),
          folded(out, { label: "result" })),
  );
}

const yesNo = (v) => (v === true ? "yes" : v === false ? "no" : fmt.NONE);

export function rewardsTable(rewards) {
  return table([
    { label: "Tool", cls: "col-tool", cell: (r) => r.tool },
    { label: "Status", cls: "col-status", cell: (r) => badge(r.status) },
    { label: "Correct", cls: "col-correct", cell: (r) => yesNo(r.correct) },
    { label: "Reward", cls: "col-reward", cell: (r) => rewardBadge(r.reward) },
    { label: "vs eager", cls: "num col-eager", cell: (r) => fmt.speedup(r.speedup_vs_eager) },
    { label: "vs compile", cls: "num col-compile", cell: (r) => fmt.speedup(r.speedup_vs_compile) },
    { label: "Kernel", cls: "num", cell: (r) => fmt.ms(r.candidate_ms) },
    { label: "Eager", cls: "num", cell: (r) => fmt.ms(r.eager_ms) },
    { label: "Compile", cls: "num", cell: (r) => fmt.ms(r.compile_ms) },
    { label: "Flags", cls: "col-flags", cell: (r) => (r.flags?.length ? r.flags.join(", ") : fmt.NONE) },
  ], rewards, "data rewards");
}

export function turnView(turn) {
  const msg = turn.assistant || {};
  const text = messageText(msg.content);
  const calls = Array.isArray(msg.tool_calls) ? msg.tool_calls : [];
  const results = Array.isArray(turn.tool_results) ? turn.tool_results : [];
  const meta = [
    turn.finish_reason ? `finish: ${turn.finish_reason}` : null,
    typeof turn.completion_tokens === "number" ? `${fmt.count(turn.completion_tokens)} tokens out` : null,
    `policy ${fmt.ms(turn.policy_ms)}`,
    `tools ${fmt.ms(turn.tools_ms)}`,
  ].filter(Boolean);
  return h("article", { class: "turn", id: `turn-${turn.idx + 1}`, dataset: { idx: turn.idx } },
    h("header", { class: "turn-head" },
      h("h3", {}, `Turn ${turn.idx + 1}`),
      h("span", { class: "muted" }, meta.join(" · ")),
      turn.malformed ? badge("malformed") : null),
    text ? h("div", { class: "message" }, folded(text, { label: "message", lines: 20, chars: 2000 })) : null,
    calls.map((c) => callView(c, results)),
    turn.rewards && turn.rewards.length ? rewardsTable(turn.rewards) : null,
  );
}
