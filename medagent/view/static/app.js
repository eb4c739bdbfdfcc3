// The run viewer's page. Every value from a run (questions, documents, model output, patient answers) is
// untrusted: it reaches the DOM only as text nodes (textContent / createTextNode), never as HTML, and the
// server's CSP forbids inline script. Highlights are <mark> elements holding text nodes.
"use strict";

const state = { runs: [], qa: [], ivRuns: [], a: null, b: null, flip: "", sort: "order", search: "", offset: 0, limit: 50 };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "onclick" || k === "onchange" || k === "oninput") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function fmt(v, digits = 3) {
  if (v === null || v === undefined) return "n/a";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(digits);
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

function pct(v) { return v === null || v === undefined ? "n/a" : (100 * v).toFixed(1) + "%"; }

let pending = 0;  // requests in flight; the body's data-busy says whether any is
async function api(path) {
  pending += 1;
  document.body.dataset.busy = "true";
  try {
    const r = await fetch(path, { headers: { Accept: "application/json" } });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  } finally {
    pending -= 1;
    document.body.dataset.busy = String(pending > 0);
  }
}

// Each view takes a ticket before it fetches; a view whose ticket is no longer the latest (the user moved on
// while its request was in flight) shows nothing, so a slow answer never overwrites a newer one.
let latest = 0;
function ticket() { latest += 1; return latest; }

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes.flat());
  setStatus("");
}

function setStatus(text) { document.getElementById("status").textContent = text; }

// Runs ------------------------------------------------------------------------------------------------
function kv(obj) {
  const rows = Object.entries(obj || {}).filter(([, v]) => v !== null && v !== undefined && v !== "");
  return el("table", { class: "kv" }, rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, fmt(v)))));
}

function runCard(run) {
  const parts = [el("h2", {}, run.label), el("p", { class: "muted" }, run.kind + " run: " + run.path)];
  parts.push(el("h3", {}, "Config"), kv(run.config));
  if (run.metrics) {
    const m = run.metrics;
    parts.push(el("h3", {}, "Metrics"), kv({
      accuracy: pct(m.accuracy),
      "95% CI": pct(m.ci95[0]) + " to " + pct(m.ci95[1]),
      "scored (n)": m.scored, correct: m.correct, invalid: pct(m.invalid_rate), errors: pct(m.error_rate), missing: m.missing,
    }));
  }
  if (run.recorded_metrics) parts.push(el("h3", {}, "Metrics (as recorded)"), kv(run.recorded_metrics));
  if (run.scores) {
    parts.push(el("h3", {}, "Scores (mean, 95% CI)"), kv(Object.fromEntries(Object.entries(run.scores).map(
      ([k, s]) => [k, fmt(s.mean) + " [" + fmt(s.ci95[0]) + ", " + fmt(s.ci95[1]) + "] n=" + s.n]))));
    parts.push(kv({ interviews: run.n, scored: run.scored, skipped: run.skipped, errors: run.errors }));
  }
  parts.push(el("h3", {}, "Cost per " + (run.kind === "qa" ? "question" : "interview") + " (mean)"), kv(run.cost));
  parts.push(el("h3", {}, "Departures from the paper"));
  parts.push(run.departures.length
    ? el("ul", { class: "departures" }, run.departures.map((d) => el("li", {}, fmt(d))))
    : el("p", { class: "muted" }, "none recorded in the manifest"));
  if (run.kind === "interview") parts.push(el("a", { href: "#interviews=" + run.index }, "interviews of this run"));
  return el("section", { class: "card run", "data-run": run.index }, parts);
}

function summaryTable() {
  // One line per run, side by side: what a comparison of arms is read from first.
  const head = ["run", "kind", "n", "accuracy", "95% CI", "invalid", "errors", "tokens / item", "seconds / item"];
  const rows = state.runs.map((r) => {
    const m = r.metrics;
    const tokens = (r.cost.prompt_tokens || 0) + (r.cost.completion_tokens || 0);
    return el("tr", { "data-run": r.index }, el("td", {}, r.label), el("td", {}, r.kind), el("td", {}, fmt(r.n)),
      el("td", {}, m ? pct(m.accuracy) : "-"), el("td", {}, m ? pct(m.ci95[0]) + " to " + pct(m.ci95[1]) : "-"),
      el("td", {}, m ? pct(m.invalid_rate) : "-"), el("td", {}, m ? pct(m.error_rate) : "-"),
      el("td", {}, fmt(tokens, 0)), el("td", {}, fmt(r.cost.latency_s, 2)));
  });
  return el("table", { id: "runs-summary" }, el("tr", {}, head.map((h) => el("th", {}, h))), rows);
}

function viewRuns(notes) {
  const nodes = [el("h2", {}, "Runs (" + state.runs.length + ")"), summaryTable(), ...state.runs.map(runCard)];
  if (notes.length) nodes.push(el("h3", {}, "Notes"), el("ul", { class: "notes" }, notes.map((n) => el("li", {}, n))));
  show(...nodes);
}

// Questions -------------------------------------------------------------------------------------------
function runSelect(id, value, onchange) {
  return el("select", { id, onchange }, state.qa.map((r) => {
    const o = el("option", { value: r.index }, r.label);
    if (r.index === value) o.selected = true;
    return o;
  }));
}

function optionSelect(id, options, value, onchange) {
  return el("select", { id, onchange }, options.map(([v, label]) => {
    const o = el("option", { value: v }, label);
    if (v === value) o.selected = true;
    return o;
  }));
}

async function viewQuestions() {
  const reload = () => { state.offset = 0; viewQuestions(); };
  const controls = el("div", { class: "controls" },
    el("label", {}, "run A ", runSelect("run-a", state.a, (e) => { state.a = Number(e.target.value); reload(); })),
    el("label", {}, "run B ", runSelect("run-b", state.b, (e) => { state.b = Number(e.target.value); reload(); })),
    el("label", {}, "show ", optionSelect("flip", [["", "all questions"], ["right_to_wrong", "right in A, wrong in B"],
      ["wrong_to_right", "wrong in A, right in B"]], state.flip, (e) => { state.flip = e.target.value; reload(); })),
    el("label", {}, "sort ", optionSelect("sort", [["order", "as written"], ["-cost", "cost, highest first"],
      ["cost", "cost, lowest first"]], state.sort, (e) => { state.sort = e.target.value; reload(); })),
    el("label", {}, "id ", el("input", { id: "search", value: state.search, size: 12, onchange: (e) => { state.search = e.target.value; reload(); } })));
  const q = new URLSearchParams({ offset: state.offset, limit: state.limit, sort: state.sort, search: state.search });
  if (state.flip && state.a !== null && state.b !== null) { q.set("flip", state.flip); q.set("a", state.a); q.set("b", state.b); }
  const t = ticket();
  const body = await api("/api/questions?" + q);
  if (t !== latest) return;
  const head = el("tr", {}, el("th", {}, "question"), state.qa.map((r) => el("th", {}, r.label)), el("th", {}, "tokens"));
  const rows = body.rows.map((row) => el("tr", { "data-id": row.id },
    el("td", {}, el("a", { href: "#q=" + encodeURIComponent(row.id), class: "qlink" }, row.id)),
    state.qa.map((r) => {
      const c = row.cells[String(r.index)];
      if (!c) return el("td", { class: "missing" }, "-");
      const label = c.status === "error" ? "error" : c.status === "invalid" ? "INVALID" : c.answer + (c.status === "answered" ? "" : " (" + c.status + ")");
      return el("td", { class: c.status, title: c.tokens + " tokens, " + c.latency_s + " s" }, label);
    }),
    el("td", {}, String(row.tokens))));
  const last = Math.min(body.offset + body.rows.length, body.total);
  const pager = el("div", { class: "controls" },
    el("button", { id: "prev", onclick: () => { state.offset = Math.max(0, state.offset - state.limit); viewQuestions(); } }, "previous"),
    el("span", { id: "range" }, (body.total ? body.offset + 1 : 0) + "-" + last + " of " + body.total),
    el("button", { id: "next", onclick: () => { if (last < body.total) { state.offset += state.limit; viewQuestions(); } } }, "next"));
  show(el("h2", {}, "Questions"), controls, el("table", { id: "questions" }, el("thead", {}, head), el("tbody", {}, rows)), pager);
  performance.mark("questions-rendered");  // benchmarks/bench_view.py reads the first one
  setStatus(body.total + " questions");
}

// One question ------------------------------------------------------------------------------------------
function marked(text, spans) {
  // Text nodes between <mark> elements; overlapping spans are merged first.
  const merged = [];
  for (const [s, e] of [...spans].sort((x, y) => x[0] - y[0])) {
    if (merged.length && s <= merged[merged.length - 1][1]) merged[merged.length - 1][1] = Math.max(merged[merged.length - 1][1], e);
    else merged.push([s, e]);
  }
  const out = el("div", { class: "doc-text" });
  let pos = 0;
  for (const [s, e] of merged) {
    out.appendChild(document.createTextNode(text.slice(pos, s)));
    out.appendChild(el("mark", {}, text.slice(s, e)));
    pos = e;
  }
  out.appendChild(document.createTextNode(text.slice(pos)));
  return out;
}

function stepRow(s) {
  const name = s.tool || s.name || (s.kind === "gate" ? s.decision : "") || "";
  const args = s.arguments || s.args;
  let detail = s.result ?? s.content ?? s.message ?? s.answer ?? null;
  if (s.kind === "gate") detail = { confidence: s.confidence, threshold: s.threshold, method: s.method, first_answer: s.first_answer, tools_answer: s.tools_answer };
  if (s.kind === "memory") detail = Object.fromEntries(Object.entries(s).filter(([k]) => !["step", "kind"].includes(k)));
  const tokens = s.prompt_tokens !== undefined ? s.prompt_tokens + "+" + (s.completion_tokens || 0) : "";
  const time = s.latency_s !== undefined ? Number(s.latency_s).toFixed(2) + " s" : "";
  return el("tr", { class: "step step-" + s.kind },
    el("td", {}, fmt(s.step)), el("td", { class: "step-kind" }, fmt(s.kind)), el("td", {}, fmt(name)),
    el("td", {}, args ? el("pre", {}, JSON.stringify(args, null, 1)) : ""),
    el("td", {}, detail === null ? "" : el("pre", {}, typeof detail === "string" ? detail : JSON.stringify(detail, null, 1))),
    el("td", {}, tokens), el("td", {}, time));
}

function docCard(d) {
  const meta = Object.fromEntries(Object.entries(d).filter(([k]) => !["text", "quotes", "steps", "content", "excerpt", "preview"].includes(k)));
  const spans = d.quotes.flatMap((q) => q.spans);
  const parts = [el("h4", {}, (d.handle ? d.handle + " " : "") + (d.title || d.doc_id || "")), kv(meta)];
  if (d.text) parts.push(marked(d.text, spans));
  else parts.push(el("p", { class: "muted" }, "document text not recorded in the trace"));
  for (const q of d.quotes) {
    const flag = q.verified === false ? " (not found in the document by the agent)" : q.spans.length ? "" : d.text ? " (not located in the text shown)" : "";
    parts.push(el("p", { class: "quote" }, "quote: ", el("mark", {}, q.quote), flag));
  }
  return el("div", { class: "card doc" }, parts);
}

async function viewQuestion(id) {
  const t = ticket();
  const d = await api("/api/question?id=" + encodeURIComponent(id));
  if (t !== latest) return;
  const nodes = [el("h2", {}, "Question " + d.id)];
  if (d.question) {
    nodes.push(el("p", { id: "question-text" }, d.question.text));
    if (d.question.options) nodes.push(el("ol", { id: "options" }, Object.entries(d.question.options).map(([k, v]) =>
      el("li", { class: d.gold && d.gold.answer === k ? "gold" : "" }, k + ". " + v + (d.gold && d.gold.answer === k ? "  (gold)" : "")))));
  } else nodes.push(el("p", { class: "muted" }, "question text not kept in these run directories"));
  if (d.gold) nodes.push(el("p", { id: "gold" }, "gold: " + d.gold.answer + (d.gold.answer_text ? " - " + d.gold.answer_text : "")));
  for (const a of d.answers) {
    const sec = [el("h3", {}, a.label)];
    if (a.missing) { nodes.push(el("section", { class: "card answer" }, sec, el("p", {}, "not answered in this run"))); continue; }
    sec.push(el("p", { class: "answer-line" }, "answer: " + a.answer + " (" + a.status + ")" + (a.error ? "  error: " + a.error : "")));
    sec.push(kv(Object.assign({ latency_s: a.latency_s }, a.usage)));
    if (a.raw) sec.push(el("details", {}, el("summary", {}, "raw reply"), el("pre", {}, a.raw)));
    sec.push(el("h4", {}, "Trace (" + a.trace.length + " steps)"));
    sec.push(el("table", { class: "trace" }, el("tr", {}, ["#", "kind", "tool / name", "arguments", "result", "tokens", "time"].map((h) => el("th", {}, h))), a.trace.map(stepRow)));
    sec.push(el("h4", {}, "Documents (" + a.documents.length + ")"), ...a.documents.map(docCard));
    nodes.push(el("section", { class: "card answer", "data-run": a.run }, sec));
  }
  show(...nodes);
}

// Interviews ------------------------------------------------------------------------------------------
async function viewInterviews(runIndex) {
  if (!state.ivRuns.length) { show(el("p", {}, "no interview runs given")); return; }
  const run = runIndex === null ? state.ivRuns[0].index : runIndex;
  const t = ticket();
  const body = await api("/api/interviews?run=" + run);
  if (t !== latest) return;
  const rows = body.interviews.map((i) => el("tr", {},
    el("td", {}, el("a", { href: "#iv=" + run + "/" + encodeURIComponent(i.id), class: "ivlink" }, i.id)),
    el("td", {}, i.source), el("td", {}, i.outcome), el("td", {}, fmt(i.rouge_l)), el("td", {}, fmt(i.red_flag_recall)), el("td", {}, fmt(i.differential_hit))));
  show(el("h2", {}, "Interviews: " + body.label),
    el("div", { class: "controls" }, state.ivRuns.map((r) => el("a", { href: "#interviews=" + r.index }, r.label))),
    el("table", { id: "interviews" }, el("tr", {}, ["interview", "source", "outcome", "ROUGE-L", "red-flag recall", "differential hit"].map((h) => el("th", {}, h))), rows));
}

function stateView(s) {
  if (!s) return el("p", { class: "muted" }, "no state recorded");
  return el("div", { class: "state" },
    el("p", {}, "phase: " + fmt(s.phase) + (s.red_flags.length ? "; red flags: " + s.red_flags.join(", ") : "")),
    el("table", { class: "slots" }, el("tr", {}, ["slot", "value", "patient's words", "turn"].map((h) => el("th", {}, h))),
      s.slots.map((x) => el("tr", {}, el("td", {}, x.slot), el("td", {}, x.value), el("td", {}, x.quote ? el("q", {}, x.quote) : "-"), el("td", {}, fmt(x.turn))))),
    el("ol", { class: "differential" }, s.differential.map((h) => el("li", {}, h.diagnosis + " (" + fmt(h.probability, 2) + ")" + (h.reason ? ": " + h.reason : "")))));
}

async function viewInterview(run, id) {
  const t = ticket();
  const d = await api("/api/interview?run=" + run + "&id=" + encodeURIComponent(id));
  if (t !== latest) return;
  const turns = d.turns.map((t) => el("div", { class: "turn" },
    el("p", { class: "q" }, "Turn " + t.turn + " [" + fmt(t.phase) + ", " + fmt(t.slot) + "]: " + t.question),
    el("p", { class: "a" }, "Patient: " + t.answer),
    el("p", { class: "muted" }, "why: " + (t.reason || "-") + "; completeness " + fmt(t.completeness, 2) + ", entropy " + fmt(t.entropy, 2)),
    el("details", { open: "" }, el("summary", {}, "state after this turn"), stateView(t.state))));
  const a = d.assessment || {};
  const assessment = el("div", { class: "card", id: "assessment" }, el("h3", {}, "Agent's assessment"),
    el("p", {}, a.statement || ""),
    el("ol", {}, (a.differential || []).map((x) => el("li", {}, fmt(x.diagnosis || x.name || x) + (x.reason ? ": " + x.reason : "")))),
    el("p", {}, "next steps: " + (a.next_steps || []).join("; ")), el("p", {}, "red flags: " + (a.red_flags || []).join("; ")),
    el("p", { class: "muted" }, "summary: " + (a.summary || "")));
  const reference = el("div", { class: "card", id: "reference" }, el("h3", {}, "Physician's reference"), el("p", {}, (d.reference || {}).statement || "none"));
  const sim = el("table", { id: "simulator" }, el("tr", {}, ["question", "patient answer", "fidelity"].map((h) => el("th", {}, h))),
    d.simulator.map((s) => el("tr", {}, el("td", {}, fmt(s.question || "")), el("td", {}, fmt(s.answer || s.text || s)), el("td", {}, fmt(s.label || s.fidelity)))));
  const refused = el("table", { id: "refused" }, el("tr", {}, ["turn", "kind", "slot or flag", "value", "patient's words", "why refused"].map((h) => el("th", {}, h))),
    d.refused.map((r) => el("tr", {}, el("td", {}, fmt(r.turn)), el("td", {}, r.kind), el("td", {}, r.name), el("td", {}, r.value), el("td", {}, r.quote ? el("q", {}, r.quote) : "-"), el("td", {}, r.reason))));
  show(el("h2", {}, "Interview " + d.id + " (" + d.label + ")"), el("p", {}, d.outcome),
    el("h3", {}, "Transcript"), el("div", { id: "turns" }, turns),
    d.refused.length ? [el("h3", {}, "Kept out of the state (grounding)"), refused] : [],
    el("div", { class: "two-col" }, assessment, reference),
    el("h3", {}, "Scores"), kv(d.record || {}),
    Object.keys(d.extra || {}).length ? [el("h3", {}, "Other recorded scores"), kv(d.extra)] : [],
    el("h3", {}, "Simulated patient (fidelity of each answer)"), sim);
}

// Routing ---------------------------------------------------------------------------------------------
async function route() {
  const h = decodeURIComponent(location.hash.slice(1)) || "runs";
  for (const n of ["runs", "questions", "interviews"]) document.getElementById("nav-" + n).classList.toggle("active", h.startsWith(n));
  try {
    if (h.startsWith("q=")) await viewQuestion(h.slice(2));
    else if (h === "questions") await viewQuestions();
    else if (h.startsWith("interviews")) await viewInterviews(h.includes("=") ? Number(h.split("=")[1]) : null);
    else if (h.startsWith("iv=")) { const rest = h.slice(3); const i = rest.indexOf("/"); await viewInterview(Number(rest.slice(0, i)), rest.slice(i + 1)); }
    else { ticket(); viewRuns(state.notes || []); }
  } catch (e) {
    show(el("p", { class: "error" }, "error: " + e.message));
  }
  document.body.dataset.view = h.split("=")[0];
}

async function start() {
  const body = await api("/api/runs");
  state.runs = body.runs;
  state.notes = body.notes;
  state.qa = body.runs.filter((r) => r.kind === "qa");
  state.ivRuns = body.runs.filter((r) => r.kind === "interview");
  if (state.qa.length) { state.a = state.qa[0].index; state.b = state.qa[state.qa.length - 1].index; }
  window.addEventListener("hashchange", route);
  await route();
  document.body.dataset.ready = "true";
}

start();
