// pages/submit.js: a form for POST /v1/optimize: a module pasted or read from a .py file, the
// task's name, suite and backend, the policy (expert, or openai with its endpoint, model and
// sampling), limits and timing options, the API key (kept in sessionStorage) and what to
// publish (the leaderboard shows only published episodes). On 202 it
// goes to the job's page; otherwise it shows the API's error and marks the field to blame.
import { navigate } from "../app.js";
import { postJson, storedKey, storeKey } from "../api.js";
import { h, fill } from "../dom.js";
import { errorBox } from "../parts.js";

const LIMITS = [
  ["max_turns", "Turns", 200],
  ["max_context_tokens", "Context tokens", 131072],
  ["max_wall_s", "Wall time (s)", 3600],
  ["max_gpu_s", "GPU time (s)", 1800],
  ["max_tool_output_bytes", "Tool output (bytes)", 16384],
];
const SAMPLING = [
  ["temperature", "Temperature", "0.01"],
  ["top_p", "Top p", "0.01"],
  ["max_tokens", "Max tokens", "1"],
  ["seed", "Seed", "1"],
];
const EXAMPLE = `import torch
import torch.nn as nn

class Model(nn.Module):
    ...

def get_inputs():
    ...

def get_init_inputs():
    return []`;
const SUBMIT = "Start the optimization";

// An <input> with its label; `field` is the API's name for it (where an error points).
function input(field, label, attrs = {}, hint = null) {
  const el = h("input", { id: `f-${field.replace(/\./g, "-")}`, name: field, dataset: { field }, ...attrs });
  return h("label", { class: "field" }, h("span", {}, label), el, hint ? h("small", { class: "hint" }, hint) : null);
}

const control = (form, field) => form.querySelector(`[data-field="${field}"]`);

function numberValue(form, field) {
  const el = control(form, field);
  return el && el.value.trim() !== "" ? Number(el.value) : undefined;
}

function textValue(form, field) {
  const el = control(form, field);
  return el && el.value.trim() !== "" ? el.value.trim() : undefined;
}

// Drops the keys whose value is undefined; undefined when nothing is left.
function compact(obj) {
  const out = Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined));
  return Object.keys(out).length ? out : undefined;
}

const numbers = (form, prefix, specs) =>
  compact(Object.fromEntries(specs.map(([k]) => [k, numberValue(form, `${prefix}.${k}`)])));

// The request body from the form; the fields left empty are left out (the API's defaults).
function body(form) {
  const policy = form.querySelector('input[name="policy"]:checked').value;
  const req = {
    task: compact({
      source: control(form, "task.source").value,
      name: textValue(form, "task.name"),
      suite: textValue(form, "task.suite"),
    }),
    backend: control(form, "backend").value,
    policy: { name: policy },
    limits: numbers(form, "limits", LIMITS),
    options: compact({
      budget_s: numberValue(form, "options.budget_s"),
      no_compile: control(form, "options.no_compile").checked || undefined,
    }),
    publish: control(form, "publish").value,
  };
  if (policy === "openai") {
    Object.assign(req.policy, compact({
      base_url: textValue(form, "policy.base_url"),
      model: textValue(form, "policy.model"),
      api_key_name: textValue(form, "policy.api_key_name"),
      sampling: numbers(form, "policy.sampling", SAMPLING),
    }));
  }
  return compact(req);
}

// The input the API blamed: the field itself, else its closest parent (policy.sampling.x ->
// policy.sampling), else its first part ("task" -> task.source); the key for 401 and 403.
function blamed(form, err) {
  if (err.status === 401 || err.status === 403) return control(form, "key");
  if (!err.field) return null;
  for (let f = err.field; f; f = f.includes(".") ? f.slice(0, f.lastIndexOf(".")) : null) {
    const el = form.querySelector(`[data-field="${CSS.escape(f)}"]`);
    if (el) return el;
  }
  return form.querySelector(`[data-field^="${CSS.escape(err.field)}."]`);
}

function moduleFields(errors) {
  const source = h("textarea", { id: "f-task-source", name: "task.source", dataset: { field: "task.source" },
    rows: 16, spellcheck: "false", placeholder: EXAMPLE });
  const file = h("input", { type: "file", id: "f-file", accept: ".py,text/x-python" });
  const set = h("fieldset", {},
    h("legend", {}, "Module"),
    h("p", { class: "hint" },
      "A KernelBench-format file: class Model(nn.Module), get_inputs() and get_init_inputs()."),
    h("label", { class: "field" }, h("span", {}, "Upload a .py file"), file),
    h("label", { class: "field wide" }, h("span", {}, "or paste it"), source),
    h("div", { class: "row" },
      input("task.name", "Task name", { maxlength: 128, placeholder: "from the file name, else task-<sha>" }),
      input("task.suite", "Suite", { placeholder: "optional, e.g. examples" }),
      h("label", { class: "field" }, h("span", {}, "Backend"),
        h("select", { id: "f-backend", name: "backend", dataset: { field: "backend" } },
          h("option", { value: "cuda" }, "cuda (GPU)"),
          h("option", { value: "cpu" }, "cpu")))),
  );
  // a file read into the text area; its name becomes the task's name unless one was typed
  file.addEventListener("change", () => {
    const f = file.files[0];
    if (!f) return;
    const reader = new FileReader();
    reader.onload = () => {
      source.value = String(reader.result);
      const name = control(set, "task.name");
      if (!name.value) name.value = f.name.replace(/\.py$/i, "");
    };
    reader.onerror = () =>
      fill(errors, errorBox({ message: `${f.name} could not be read.` }, "The file could not be read"));
    reader.readAsText(f);
  });
  return set;
}

function policyFields() {
  const openai = h("fieldset", { class: "openai", hidden: true },
    h("legend", {}, "OpenAI-compatible endpoint"),
    input("policy.base_url", "Base URL", { type: "url", placeholder: "http://vllm:8000/v1" }),
    input("policy.model", "Model", { placeholder: "the model the endpoint serves" }),
    input("policy.api_key_name", "Key name", { placeholder: "optional" },
      "The name of a key in the worker's configuration (KFORGE_POLICY_KEY_<NAME>), never the key itself."),
    h("div", { class: "row" },
      SAMPLING.map(([k, label, step]) => input(`policy.sampling.${k}`, label, { type: "number", step }))),
  );
  const radio = (value, label) =>
    h("label", { class: "radio" },
      h("input", { type: "radio", name: "policy", value, checked: value === "expert",
        onchange: () => { openai.hidden = value !== "openai"; } }),
      label);
  return h("fieldset", {},
    h("legend", {}, "Policy"),
    h("div", { class: "row", dataset: { field: "policy" } },
      radio("expert", "expert (built in, no LLM)"),
      radio("openai", "openai (your model)")),
    openai,
  );
}

function limitFields() {
  const limit = ([k, label, def]) =>
    input(`limits.${k}`, label, { type: "number", min: 1, step: 1, placeholder: String(def) });
  return h("details", { class: "more" },
    h("summary", {}, "Limits and timing"),
    h("div", { class: "row" }, LIMITS.map(limit)),
    h("div", { class: "row" },
      input("options.budget_s", "Timing budget (s)",
        { type: "number", step: "0.1", min: "0.1", max: "10", placeholder: "default" }),
      h("label", { class: "field checkbox" },
        h("input", { type: "checkbox", id: "f-no-compile", dataset: { field: "options.no_compile" } }),
        h("span", {}, "skip the torch.compile baseline"))),
  );
}

function keyFields() {
  const key = h("input", { id: "f-key", type: "password", name: "key", dataset: { field: "key" }, autocomplete: "off",
    value: storedKey(), placeholder: "kf_…" });
  return h("fieldset", {},
    h("legend", {}, "API key and publishing"),
    h("label", { class: "field" }, h("span", {}, "Key"), key,
      h("small", { class: "hint" }, "Sent as Authorization: Bearer; kept in this tab only. The job is its owner's.")),
    h("label", { class: "field" }, h("span", {}, "Publish"),
      h("select", { id: "f-publish", name: "publish", dataset: { field: "publish" } },
        h("option", { value: "none" }, "no: private to the key's owner"),
        h("option", { value: "results" }, "results: on the leaderboard, without sources"),
        h("option", { value: "sources" }, "results and sources: the trajectory and the kernel too"))),
  );
}

export async function render(ctx) {
  document.title = "Submit a module · kforge";
  const errors = h("div", { class: "form-errors" });
  const submit = h("button", { type: "submit", class: "primary" }, SUBMIT);
  const form = h("form", { class: "submit-form", novalidate: true },
    moduleFields(errors), policyFields(), limitFields(), keyFields(), errors, h("p", { class: "actions" }, submit));

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
    fill(errors);
    const key = control(form, "key").value.trim();
    storeKey(key);
    submit.disabled = true;
    submit.textContent = "Starting…";
    try {
      const res = await postJson("/v1/optimize", body(form), key);
      await navigate(`/jobs/${res.job.id}`);
    } catch (err) {
      submit.disabled = false;
      submit.textContent = SUBMIT;
      fill(errors, errorBox(err, "The API refused the job"));
      const el = blamed(form, err);
      if (el) {
        el.setAttribute("aria-invalid", "true");
        el.focus();
      }
    }
  });

  fill(ctx.view,
    h("h1", {}, "Submit a module"),
    h("p", { class: "lead" },
      "A worker runs an agent episode on it: kernels are written, built, checked on fresh inputs",
      " and timed against eager and torch.compile; you follow it live."),
    form,
  );
}
