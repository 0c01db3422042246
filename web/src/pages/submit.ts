// Submit: a JobSpec editor (YAML) and the code, from a folder picked in the browser (zipped
// here with the capsule's default exclusions), a .zip, an example's own files, or — to run an
// earlier job again — that job's stored capsule (capsuleSha256: nothing uploaded); sent with
// progress as POST /api/v1/jobs (multipart). Validation errors are shown at their field paths,
// with the line they point to; a job its fleet can never run shows the API's refusal.
import { strToU8, zip, zipSync } from "fflate";
import { errorFrom, token, unauthorized, type ApiError, type Job } from "../api";
import { clear, h, link } from "../dom";
import { BLANK_SPEC, EXAMPLES } from "../examples";
import { bytes, ignoredPath, stripTopFolder, yamlLineOf } from "../format";
import type { Cleanup, Ctx } from "../main";
import { RESUBMIT_KEY, type Resubmit } from "./job";

const NO_CODE = "No code chosen: the JobSpec alone is sent (as job.yaml), enough for an entrypoint that needs no files.";

export function submitPage(ctx: Ctx): Cleanup {
  document.title = "Submit · StarForge";
  const stored = sessionStorage.getItem(RESUBMIT_KEY);
  sessionStorage.removeItem(RESUBMIT_KEY);
  let again: Resubmit | null = null;
  if (stored) {
    try {
      again = JSON.parse(stored) as Resubmit;
    } catch {
      again = { spec: stored };
    }
  }
  const editor = h("textarea", {
    id: "spec-editor",
    name: "spec",
    rows: 18,
    spellcheck: "false",
    autocomplete: "off",
    "aria-describedby": "spec-help spec-errors",
  });
  editor.value = again?.spec ?? BLANK_SPEC;
  // Tab inserts two spaces (YAML indents with spaces); Escape then Tab leaves the editor.
  let escaped = false;
  editor.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      escaped = true;
      return;
    }
    if (e.key === "Tab" && !e.shiftKey && !escaped) {
      e.preventDefault();
      editor.setRangeText("  ", editor.selectionStart, editor.selectionEnd, "end");
    }
    escaped = false;
  });

  const folder = h("input", { type: "file", id: "code-folder", name: "code-folder", webkitdirectory: true, multiple: true });
  const zipInput = h("input", { type: "file", id: "code-zip", name: "code-zip", accept: ".zip,application/zip" });
  const codeInfo = h("p", { class: "muted", id: "code-info", role: "status" }, NO_CODE);
  const errors = h("div", { id: "spec-errors", role: "alert" });
  const progress = h("progress", { id: "upload-progress", max: 100, value: 0, hidden: true, "aria-label": "Upload progress" });
  const progressText = h("span", { class: "muted", id: "upload-text", role: "status" });
  const submit = h("button", { type: "submit", class: "primary", id: "submit" }, "Submit");

  let code: Blob | null = null;
  // Running an earlier job again: its stored capsule, unless other code is chosen.
  const reuse = h("input", { type: "checkbox", id: "reuse-capsule", checked: Boolean(again?.capsuleSha256) });
  const reuseField = again?.capsuleSha256
    ? h(
        "div",
        { class: "field check-row" },
        h(
          "label",
          { for: "reuse-capsule", class: "check" },
          reuse,
          ` The code of ${again.from ?? "the earlier job"} (its stored capsule ${again.capsuleSha256.slice(0, 12)}…; nothing is uploaded)`,
        ),
      )
    : null;
  const useCode = (blob: Blob | null, info: string) => {
    code = blob;
    codeInfo.textContent = info;
    if (blob) reuse.checked = false;
  };
  // The examples: the JobSpec into the editor, their files zipped here as the code.
  const template = h(
    "select",
    { id: "template" },
    h("option", { value: "" }, again ? "The earlier job's JobSpec" : "A blank JobSpec"),
    EXAMPLES.map((e) => h("option", { value: e.id }, `Example: ${e.title}`)),
  );
  template.addEventListener("change", () => {
    const ex = EXAMPLES.find((e) => e.id === template.value);
    if (!ex) {
      editor.value = again?.spec ?? BLANK_SPEC;
      return;
    }
    editor.value = ex.spec;
    folder.value = "";
    zipInput.value = "";
    const entries = Object.fromEntries(Object.entries(ex.files).map(([p, t]) => [p, strToU8(t)]));
    zip(entries, { level: 6 }, (err, data) => {
      if (err) return useCode(null, `Cannot zip the example: ${err.message}`);
      const names = Object.keys(ex.files).join(", ");
      useCode(new Blob([data as BlobPart], { type: "application/zip" }), `The example's code: ${names} (${bytes(data.length)} zipped). Choose a folder or a .zip to use yours instead.`);
    });
  });
  // /submit?example=tiny-train (the jobs page's empty state links there).
  const wanted = new URLSearchParams(location.search).get("example");
  if (!again && EXAMPLES.some((e) => e.id === wanted)) {
    template.value = wanted!;
    queueMicrotask(() => template.dispatchEvent(new Event("change")));
  }
  folder.addEventListener("change", async () => {
    zipInput.value = "";
    const files = [...(folder.files ?? [])];
    if (!files.length) return;
    codeInfo.textContent = `Reading ${files.length} files…`;
    const rel = stripTopFolder(files.map((f) => f.webkitRelativePath || f.name));
    const entries: Record<string, Uint8Array> = {};
    let kept = 0;
    let size = 0;
    for (let i = 0; i < files.length; i++) {
      if (ignoredPath(rel[i])) continue;
      entries[rel[i]] = new Uint8Array(await files[i].arrayBuffer());
      kept++;
      size += files[i].size;
    }
    zip(entries, { level: 6 }, (err, data) => {
      if (err) {
        codeInfo.textContent = `Cannot zip the folder: ${err.message}`;
        code = null;
        return;
      }
      const blob = new Blob([data as BlobPart], { type: "application/zip" });
      useCode(blob, `${kept} file${kept === 1 ? "" : "s"} (${bytes(size)}, ${bytes(blob.size)} zipped); ${files.length - kept} left out (.git, __pycache__, *.pyc, .venv, .forge).`);
    });
  });
  zipInput.addEventListener("change", () => {
    folder.value = "";
    const f = zipInput.files?.[0];
    useCode(f ?? null, f ? `${f.name} (${bytes(f.size)})` : NO_CODE);
  });

  const showErrors = (e: ApiError) => {
    const list = e.errors.length ? e.errors : [{ field: e.field ?? "", message: e.message }];
    clear(
      errors,
      h(
        "p",
        { class: "error" },
        e.kind === "Rejected"
          ? `The fleet refused this job: ${e.message}`
          : e.errors.length > 1
            ? `The JobSpec has ${e.errors.length} errors; fix them and submit again:`
            : e.message,
      ),
      list.length > 1 || e.errors.length
        ? h(
            "ul",
            { class: "field-errors" },
            list.map((fe) => {
              const line = fe.field && fe.field !== "code" && fe.field !== "spec" ? yamlLineOf(editor.value, fe.field) : 0;
              const jump = h("button", { type: "button", class: "link" }, fe.field || "(spec)", line ? ` (line ${line})` : "");
              jump.addEventListener("click", () => selectLine(editor, line));
              return h("li", { "data-field": fe.field }, jump, `: ${fe.message}`);
            }),
          )
        : null,
    );
  };

  const form = h(
    "form",
    { class: "submit", "aria-label": "Submit a job" },
    h("div", { class: "field" }, h("label", { for: "template" }, "Start from"), template),
    h("label", { for: "spec-editor" }, "JobSpec (YAML or JSON)"),
    h(
      "p",
      { id: "spec-help", class: "muted" },
      "Every field: ",
      link("/help/jobspec", "the JobSpec reference"),
      ". The server validates it and names each error's field path. Tab indents; Escape then Tab leaves the editor.",
    ),
    editor,
    h(
      "fieldset",
      null,
      h("legend", null, "Code"),
      reuseField,
      h("div", { class: "field" }, h("label", { for: "code-folder" }, "A folder"), folder),
      h("div", { class: "field" }, h("label", { for: "code-zip" }, "or a .zip"), zipInput),
      codeInfo,
    ),
    errors,
    h("div", { class: "actions" }, submit, progress, progressText),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    clear(errors);
    const capsule = reuse.checked && again?.capsuleSha256 ? again.capsuleSha256 : null;
    // No code chosen: an entrypoint that needs no files (python3 -c …) runs with the JobSpec as
    // its only file (the API takes no job without code).
    const sent = code ?? new Blob([zipSync({ "job.yaml": strToU8(editor.value) }) as BlobPart], { type: "application/zip" });
    const body = new FormData();
    body.append("spec", new Blob([editor.value], { type: "application/yaml" }), "job.yaml");
    if (capsule) body.append("capsuleSha256", capsule);
    else body.append("code", sent, "code.zip");
    // XMLHttpRequest, not fetch: only it reports upload progress.
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/v1/jobs");
    xhr.setRequestHeader("Authorization", `Bearer ${token() ?? ""}`);
    progress.hidden = false;
    progress.value = 0;
    submit.disabled = true;
    xhr.upload.addEventListener("progress", (e) => {
      if (e.lengthComputable) {
        progress.value = Math.round((100 * e.loaded) / e.total);
        progressText.textContent = `Uploading ${bytes(e.loaded)} of ${bytes(e.total)}`;
      }
    });
    xhr.addEventListener("load", async () => {
      submit.disabled = false;
      progress.hidden = true;
      if (xhr.status === 201) {
        const job = JSON.parse(xhr.responseText) as Job;
        progressText.textContent = `Submitted ${job.id}`;
        ctx.navigate(`/jobs/${encodeURIComponent(job.id)}`);
        return;
      }
      progressText.textContent = "";
      if (xhr.status === 401) return unauthorized();
      const e = await errorFrom(xhr.status, xhr.responseText);
      if (e.kind === "CapsuleNotFound")
        // The capsule holds the JobSpec it ran with (.starforge/jobspec.json): it runs again only
        // with that JobSpec.
        e.message = "The stored capsule carries the JobSpec it ran with, so it runs again only with that JobSpec unchanged. To change the JobSpec, choose the code again (a folder or a .zip).";
      showErrors(e);
    });
    xhr.addEventListener("error", () => {
      submit.disabled = false;
      progress.hidden = true;
      progressText.textContent = "The upload failed: the server could not be reached.";
    });
    xhr.send(body);
  });
  clear(
    ctx.main,
    h("h1", null, again ? "Run again" : "Submit a job"),
    again
      ? h("p", { class: "muted" }, again.capsuleSha256 ? `The JobSpec and the code of ${again.from ?? "the earlier job"}.` : "The JobSpec of the earlier job; choose its code again.")
      : null,
    form,
  );
  editor.focus();
  return () => {};
}

function selectLine(ta: HTMLTextAreaElement, line: number): void {
  ta.focus();
  if (line <= 0) return;
  const lines = ta.value.split("\n");
  let start = 0;
  for (let i = 0; i < line - 1; i++) start += lines[i].length + 1;
  ta.setSelectionRange(start, start + lines[line - 1].length);
}
