// The human patient's page: drives /v1/interview/sessions (start, answer, get) and renders the agent's state.
// Every text from the server (questions, the model's assessment, guideline passages) is untrusted and is
// inserted with textContent only, never as HTML. The session id lives in the URL fragment
// (#session=<id>) so a reload picks the interview up again; its token (returned by the start only, and
// sent back as X-Session-Token on every call) lives in this tab's sessionStorage, never in the URL.
"use strict";

const API = "/v1/interview/sessions";
const $ = (id) => document.getElementById(id);
const answerBox = $("answer");
const maxChars = Number.parseInt(answerBox.dataset.maxChars, 10); // NaN when the page is not served
let sessionId = null;
let busy = false;

function showMessage(text, kind = "error") {
  const box = $("message");
  box.textContent = text;
  box.className = text ? kind : "";
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function fillTable(table, rows, empty) {
  table.replaceChildren();
  if (!rows.length) {
    cell(table.insertRow(), empty, "muted");
    return;
  }
  for (const values of rows) {
    const row = table.insertRow();
    values.forEach((v) => cell(row, v));
  }
}

// A readable sentence for every refusal the routes document (actors/ingress.py), never a raw body.
async function explain(response) {
  let detail = "";
  try {
    const body = await response.json();
    if (typeof body.detail === "string") detail = body.detail;
    else if (Array.isArray(body.detail)) detail = body.detail.map((d) => d.msg).filter(Boolean).join("; ");
  } catch (_) {
    detail = "";
  }
  switch (response.status) {
    case 404:
      return "This interview session does not exist any more (unknown or expired), or this tab did not start it. Start a new interview.";
    case 409:
      return detail || "The session is finished or still working on the last answer.";
    case 422:
      return `The answer was refused: ${detail || "it is not a valid answer"}.`;
    case 429:
      return "Too many interviews are running right now, or this computer started several recently; please try again in a few minutes.";
    case 502:
      return "The model or the guideline search failed; your answer was not lost. Press Send to try again.";
    case 503:
      return "This server does not run interview sessions (start it with interview_sessions.enabled=true).";
    default:
      return `The server could not handle the request (HTTP ${response.status}).`;
  }
}

const tokenKey = (id) => `medagent-session-token:${id}`;

async function call(method, url, body, id = sessionId) {
  const headers = body ? { "content-type": "application/json" } : {};
  const token = id ? sessionStorage.getItem(tokenKey(id)) : null;
  if (token) headers["x-session-token"] = token;
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body ? JSON.stringify(body) : undefined,
    });
  } catch (_) {
    throw new Error("The server cannot be reached. Check the connection and try again.");
  }
  if (!response.ok) throw new Error(await explain(response));
  return response.status === 204 ? null : response.json();
}

function setBusy(value) {
  busy = value;
  $("send").disabled = value || !sessionId;
  $("start").disabled = value;
  document.body.dataset.busy = value ? "true" : "false";
}

function addLine(who, text) {
  const p = document.createElement("p");
  p.className = who;
  p.textContent = `${who === "doctor" ? "Doctor" : "You"}: ${text}`;
  $("transcript").append(p);
}

function renderState(view) {
  $("phase").textContent = view.phase.replaceAll("_", " ");
  $("turn").textContent = String(view.turn);
  const c = view.scores && view.scores.completeness;
  $("completeness").textContent = typeof c === "number" ? c.toFixed(2) : "-";
  const flags = $("red-flags");
  flags.textContent = view.red_flags.length ? view.red_flags.join(", ") : "none";
  flags.className = view.red_flags.length ? "flag" : "";
  const state = view.state;
  if (!state) return;
  fillTable(
    $("slots"),
    Object.entries(state.slots).map(([name, v]) => [name.replaceAll("_", " "), v.value]),
    "nothing yet",
  );
  fillTable(
    $("differential"),
    state.differential.map((h) => [h.diagnosis, `${Math.round(h.probability * 100)} %`]),
    "none yet",
  );
}

function renderTranscript(state) {
  $("transcript").replaceChildren();
  for (const q of state.asked) {
    if (q.answer === null) continue; // the pending question is shown on its own
    addLine("doctor", q.text);
    addLine("patient", q.answer);
  }
}

function renderAssessment(view) {
  const a = view.assessment;
  $("assessment-section").hidden = false;
  $("finish-reason").textContent = `Interview ended: ${view.finish_reason || "done"}.`;
  $("statement").textContent = a.valid ? a.statement : "The agent could not write a usable assessment.";
  const cited = new Set(a.differential.flatMap((d) => d.citations));
  fillTable(
    $("assessment-differential"),
    a.differential.map((d) => [d.diagnosis, d.reason, d.citations.length ? `cites ${d.citations.join(", ")}` : ""]),
    "no differential",
  );
  const steps = $("next-steps");
  steps.replaceChildren(
    ...a.next_steps.map((s) => {
      const li = document.createElement("li");
      li.textContent = s;
      return li;
    }),
  );
  const box = $("passages");
  box.replaceChildren();
  if (!a.passages.length) {
    box.textContent = "No guideline passage was retrieved: the assessment is not grounded.";
    return;
  }
  for (const p of a.passages) {
    const div = document.createElement("div");
    div.className = cited.has(p.id) ? "passage cited" : "passage";
    div.dataset.passageId = p.id;
    const title = document.createElement("strong");
    title.textContent = `[${p.id}] ${p.title || p.doc_id}${cited.has(p.id) ? " (cited)" : ""}`;
    const excerpt = document.createElement("p");
    excerpt.textContent = p.excerpt || "";
    const source = document.createElement("span");
    source.className = "muted";
    source.textContent = p.source;
    div.append(title, excerpt, source);
    box.append(div);
  }
}

async function refresh(view) {
  // The answer route's reply has no slots or differential: read the full state once per turn.
  const full = await call("GET", `${API}/${encodeURIComponent(view.session_id)}`, undefined, view.session_id);
  renderState(full);
  renderTranscript(full.state);
  $("question").textContent = full.status === "asking" ? full.question : "";
  const pending = full.state.asked.at(-1);
  $("why").textContent = full.status === "asking" && pending && pending.reason ? `Why: ${pending.reason}` : "";
  answerBox.disabled = full.status !== "asking";
  if (full.status === "finished") {
    renderAssessment(full);
    sessionId = null;
  }
}

async function start() {
  if (busy) return;
  showMessage("");
  setBusy(true);
  $("assessment-section").hidden = true;
  try {
    showMessage("Starting the interview...", "info");
    const view = await call("POST", API, {});
    sessionId = view.session_id;
    sessionStorage.setItem(tokenKey(sessionId), view.token);
    history.replaceState(null, "", `#session=${sessionId}`);
    await refresh(view);
    showMessage("");
    answerBox.focus();
  } catch (err) {
    showMessage(err.message);
  } finally {
    setBusy(false);
  }
}

async function send(event) {
  event.preventDefault();
  if (busy || !sessionId) return;
  const text = answerBox.value.trim();
  if (!text) {
    showMessage("Please type an answer before sending.");
    return;
  }
  if (Number.isFinite(maxChars) && text.length > maxChars) {
    showMessage(
      `Your answer is ${text.length.toLocaleString("en")} characters long; please keep it under ` +
        `${maxChars.toLocaleString("en")} characters.`,
    );
    return;
  }
  setBusy(true);
  showMessage("The agent is thinking...", "info");
  try {
    const view = await call("POST", `${API}/${encodeURIComponent(sessionId)}/answer`, { answer: text });
    answerBox.value = "";
    await refresh(view);
    showMessage("");
  } catch (err) {
    showMessage(err.message); // the typed answer stays in the box, so it can be sent again
  } finally {
    setBusy(false);
  }
}

async function resume() {
  const match = /^#session=([\w-]+)$/.exec(location.hash);
  if (!match) return;
  setBusy(true);
  showMessage("");
  $("assessment-section").hidden = true;
  $("transcript").replaceChildren();
  $("question").textContent = "";
  $("why").textContent = "";
  answerBox.disabled = true;
  try {
    sessionId = match[1];
    await refresh({ session_id: sessionId });
  } catch (err) {
    sessionId = null;
    showMessage(err.message);
  } finally {
    setBusy(false);
  }
}

$("answer-form").addEventListener("submit", send);
$("start").addEventListener("click", start);
// Another session's link opened in this tab changes only the fragment: no reload, so resume here.
window.addEventListener("hashchange", resume);
document.body.dataset.ready = "true";
resume();
