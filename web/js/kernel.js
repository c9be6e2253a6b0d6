// kernel.js: a candidate's files (GET /v1/candidates/{id}) with a tab per file, highlighted by
// its extension (.cu/.cpp/.h as C, .py as Python), and the download of the whole kernel as a
// tar archive (GET /v1/candidates/{id}/download; with the tab's key, when it holds one, as the
// kernel may be its owner's alone).
import { fetchWithKey, getJson, storedKey } from "./api.js";
import { h, fill } from "./dom.js";
import { codeBlock, languageOf } from "./highlight.js";
import { empty, errorBox, loading } from "./parts.js";

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

// Kernel sources first, then the Python that calls them, each group by name.
function order(names) {
  const py = (n) => (languageOf(n) === "python" ? 1 : 0);
  return [...names].sort((a, b) => py(a) - py(b) || a.localeCompare(b));
}

// A link that downloads path as name: a plain link, or, while the tab holds a key, a fetch with
// the key whose body is saved through an object URL.
export function downloadLink(path, name, label, cls = "button") {
  const a = h("a", { class: cls, href: path, download: name }, label);
  a.addEventListener("click", async (ev) => {
    if (!storedKey()) return;
    ev.preventDefault();
    try {
      const resp = await fetchWithKey(path);
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      const url = URL.createObjectURL(await resp.blob());
      const save = h("a", { href: url, download: name });
      document.body.append(save);
      save.click();
      save.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch {
      a.textContent = `${label} (failed)`;
    }
  });
  return a;
}

function viewer(cand) {
  const names = order(Object.keys(cand.files));
  const code = h("div", { class: "file-view" });
  const tabs = names.map((name) =>
    h("button", { type: "button", role: "tab", class: "tab", dataset: { file: name }, onclick: () => select(name) },
      name),
  );
  function select(name) {
    for (const t of tabs) t.setAttribute("aria-selected", t.dataset.file === name ? "true" : "false");
    fill(code, codeBlock(cand.files[name], languageOf(name)));
  }
  const box = h("div", { class: "kernel", dataset: { candidate: cand.id } },
    h("div", { class: "kernel-head" },
      h("span", { class: "muted" }, `${cand.format} candidate · ${plural(names.length, "file")} · sha256 ${cand.sha256.slice(0, 12)}`),
      downloadLink(`/v1/candidates/${cand.id}/download`, `kforge-${cand.id.slice(0, 8)}.tar`, "Download .tar"),
    ),
    h("div", { class: "tabs", role: "tablist", "aria-label": "Files" }, tabs),
    code,
  );
  if (names.length) select(names[0]);
  return box;
}

// An element that fills itself with the candidate's files once they arrive.
export function kernelFiles(candidateId) {
  const box = h("div", { class: "kernel-box" }, loading("the kernel's files"));
  getJson(`/v1/candidates/${candidateId}`).then(
    (cand) => fill(box, viewer(cand)),
    (err) =>
      fill(box, err.status === 404
        ? empty("The kernel's files are not published (or not yours).")
        : errorBox(err, "The kernel's files could not be loaded")),
  );
  return box;
}
