// The jobsctl dashboard: polls the JSON endpoints every 2 s and renders them. Every text from
// Redis goes through textContent, never HTML. State-changing requests are POSTs carrying the
// X-Requested-With header the server requires.
"use strict";

const POLL_MS = 2000;
const state = { detail: null, recentQueue: "" };

// Listings shown page by page: the cursors of the pages before the one shown (empty: the
// newest), the next page's cursor, and the search.
const lists = {
  failed: { pages: [], next: null, filter: { job: "", queue: "", text: "", tag: "", since: "" } },
  batches: { pages: [], next: null, filter: { name: "" } },
  unique: { pages: [], next: null, filter: { job: "" } },
  recent: { pages: [], next: null, filter: { outcome: "" } },
};

const $ = (selector) => document.querySelector(selector);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(child ?? ""));
  }
  return node;
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const text = await response.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = { error: text }; }
  if (!response.ok) throw new Error((body && body.error) || `${response.status} ${response.statusText}`);
  return body;
}

function post(path, body) {
  return api(path, {
    method: "POST",
    headers: { "X-Requested-With": "jobs-dashboard", "Content-Type": "application/json" },
    body: JSON.stringify(body ?? {}),
  });
}

function setStatus(error) {
  const status = $("#status");
  if (error) {
    status.textContent = `error: ${error.message}`;
    status.className = "status error";
  } else {
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    status.className = "status";
  }
}

function duration(secs) {
  if (secs === null || secs === undefined) return "–";
  secs = Math.round(secs);
  if (secs < 60) return `${secs}s`;
  if (secs < 3600) return `${Math.floor(secs / 60)}m ${secs % 60}s`;
  if (secs < 86400) return `${Math.floor(secs / 3600)}h ${Math.floor((secs % 3600) / 60)}m`;
  return `${Math.floor(secs / 86400)}d ${Math.floor((secs % 86400) / 3600)}h`;
}

function ago(time) {
  return `${duration(Math.max(0, (Date.now() - Date.parse(time)) / 1000))} ago`;
}

function runtime(us) {
  if (us < 1000) return `${us} µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(1)} ms`;
  return `${(us / 1e6).toFixed(2)} s`;
}

// A page that stopped searching with a cursor (`more`) may be empty while a later one is not.
function fill(tbody, rows, columns, more = false) {
  const none = more ? "none in the part searched so far" : "none";
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { class: "empty", colspan: columns }, none))]));
}

function renderOverview(overview) {
  $("#processed-hour").textContent = overview.processed_last_hour;
  $("#failed-hour").textContent = overview.failed_last_hour;
  $("#running").textContent = `${overview.running} / ${overview.concurrency}`;
  $("#workers-count").textContent = overview.workers;
  $("#failed-count").textContent = overview.failed_jobs;
  renderChart(overview.minutes);
}

function renderChart(minutes) {
  const svg = $("#chart");
  const ns = "http://www.w3.org/2000/svg";
  const shape = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const left = 40, top = 10, width = 670, height = 140;
  const max = Math.max(1, ...minutes.map((m) => m.processed));
  const step = width / Math.max(1, minutes.length);
  const y = (v) => top + height - (v / max) * height;
  const nodes = [
    shape("line", { x1: left, y1: top, x2: left + width, y2: top }),
    shape("line", { x1: left, y1: top + height, x2: left + width, y2: top + height }),
    shape("text", { x: left - 6, y: top + 4, "text-anchor": "end" }, String(max)),
    shape("text", { x: left - 6, y: top + height + 4, "text-anchor": "end" }, "0"),
    shape("text", { x: left, y: top + height + 18 }, "60 min ago"),
    shape("text", { x: left + width, y: top + height + 18, "text-anchor": "end" }, "now"),
  ];
  minutes.forEach((m, i) => {
    const x = left + i * step + 1;
    const w = Math.max(1, step - 2);
    const label = `${new Date(m.minute).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}: ${m.processed} processed, ${m.failed} failed`;
    if (m.processed > 0) {
      const bar = shape("rect", { class: "processed", x, y: y(m.processed), width: w, height: top + height - y(m.processed) });
      bar.append(shape("title", {}, label));
      nodes.push(bar);
    }
    if (m.failed > 0) {
      const bar = shape("rect", { class: "failed", x, y: y(m.failed), width: w, height: top + height - y(m.failed) });
      bar.append(shape("title", {}, label));
      nodes.push(bar);
    }
  });
  svg.replaceChildren(...nodes);
}

// A queue whose wait is over its threshold gets its row highlighted and a "long wait" badge.
function waitCell(q) {
  if (!q.wait_exceeded) return el("td", { class: "num waited" }, duration(q.wait_secs));
  return el("td", { class: "num waited exceeded", title: `waiting longer than its threshold of ${duration(q.wait_threshold_secs)}` },
    duration(q.wait_secs), " ", el("span", { class: "badge long-wait" }, "long wait"));
}

function renderQueues(queues) {
  const rows = queues.map((q) => el("tr", { dataset: { queue: q.name }, class: q.wait_exceeded ? "long-wait" : "" },
    el("td", {}, q.name),
    el("td", { class: "num ready" }, String(q.ready)),
    el("td", { class: "num delayed" }, String(q.delayed)),
    el("td", { class: "num reserved" }, String(q.reserved)),
    el("td", { class: "num" }, duration(q.oldest_ready_secs)),
    waitCell(q),
    el("td", { class: "num threshold" }, duration(q.wait_threshold_secs)),
    el("td", { class: "num" }, q.per_minute.toFixed(1)),
    el("td", { class: "num wait" }, q.paused ? "paused" : duration(q.estimated_wait_secs)),
    el("td", { class: q.paused ? "paused state" : "state" }, q.paused ? "paused" : "active"),
    el("td", {}, el("button", {
      type: "button",
      class: q.paused ? "resume" : "pause",
      onclick: () => act(post(`/api/queues/${encodeURIComponent(q.name)}/${q.paused ? "resume" : "pause"}`), queueState),
    }, q.paused ? "Resume" : "Pause")),
  ));
  fill($("#queues tbody"), rows, 11);
  const select = $("#recent-queue");
  const names = queues.map((q) => q.name);
  if (names.join("\n") !== [...select.options].map((o) => o.value).join("\n")) {
    select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
  }
  if (!names.includes(state.recentQueue)) state.recentQueue = names[0] ?? "";
  select.value = state.recentQueue;
}

// A page of a listing that answers with a JSON array and its next cursor in a header.
async function apiPage(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({ error: `${response.status} ${response.statusText}` }));
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return { items: body, next: response.headers.get("x-next-cursor") };
}

function listQuery(list, extra = {}) {
  const params = new URLSearchParams(extra);
  for (const [key, value] of Object.entries(list.filter)) if (value) params.set(key, value);
  const after = list.pages[list.pages.length - 1];
  if (after) params.set("after", after);
  return params.toString();
}

// Wires a listing's search inputs (`#<inputs>-<field>`) and Newer/Older buttons.
function wireList(name, fields, inputs = name) {
  const list = lists[name];
  for (const field of fields) {
    $(`#${inputs}-${field}`).addEventListener("input", (event) => {
      list.filter[field] = event.target.value.trim();
      list.pages = [];
      refresh();
    });
  }
  $(`#${name}-older`).addEventListener("click", () => { if (list.next) { list.pages.push(list.next); refresh(); } });
  $(`#${name}-newer`).addEventListener("click", () => { list.pages.pop(); refresh(); });
}

function renderPager(name) {
  const list = lists[name];
  $(`#${name}-newer`).disabled = !list.pages.length;
  $(`#${name}-older`).disabled = !list.next;
}

function renderFailed(list) {
  const { filter, pages } = lists.failed;
  const any = Object.values(filter).some(Boolean);
  const shown = `${list.matched}${list.next ? "+" : ""}`;
  const page = pages.length ? `, page ${pages.length + 1}` : "";
  $("#failed-matched").textContent = (any ? `${shown} of ${list.total} match` : `${list.total}`) + page;
  renderPager("failed");
  const rows = list.jobs.map((job) => el("tr", {
    class: `clickable${state.detail === job.uuid ? " selected" : ""}`,
    dataset: { uuid: job.uuid },
    onclick: (event) => { if (event.target.tagName !== "BUTTON") openDetail(job.uuid); },
  },
    el("td", { class: "num" }, String(job.position)),
    el("td", {}, job.display_name || job.job, ...job.tags.map((tag) => el("span", { class: "tag" }, tag))),
    el("td", {}, job.queue),
    el("td", {}, job.failed_at),
    el("td", { class: "exception", title: job.exception }, job.exception),
    el("td", {},
      el("button", { type: "button", class: "retry", onclick: () => act(post(`/api/failed/${encodeURIComponent(job.uuid)}/retry`), retried) }, "Retry"),
      " ",
      el("button", { type: "button", class: "forget danger", onclick: () => act(post(`/api/failed/${encodeURIComponent(job.uuid)}/forget`), forgotten) }, "Forget"),
    ),
  ));
  fill($("#failed tbody"), rows, 6, Boolean(lists.failed.next));
}

function batchState(b) {
  if (b.cancelled_at) return b.finished_at ? "cancelled" : "cancelling";
  if (b.finished_at) return b.failed ? "finished with failures" : "finished";
  return "running";
}

function renderBatches(batches) {
  const rows = batches.flatMap((b) => {
    const settled = b.total - b.pending;
    const percent = b.total ? Math.floor((settled * 100) / b.total) : 100;
    const failedShare = b.total ? (b.failed * 100) / b.total : 0;
    // Widths through the CSSOM: the page's CSP refuses inline style attributes.
    const part = (kind, width) => { const span = el("span", { class: kind }); span.style.width = `${width}%`; return span; };
    const bar = el("div", { class: "progress", role: "progressbar", "aria-valuenow": String(percent), "aria-valuemin": "0", "aria-valuemax": "100", title: `${settled} of ${b.total} settled` },
      part("done", percent - failedShare), part("failed", failedShare));
    const row = el("tr", { dataset: { batch: b.id } },
      el("td", { title: b.id }, b.name || b.id),
      el("td", {}, bar, ` ${percent}%`),
      el("td", { class: "num" }, String(b.total)), el("td", { class: "num" }, String(b.pending)),
      el("td", { class: "num" }, String(b.failed)), el("td", {}, batchState(b)),
      el("td", {}, b.created_at ? ago(b.created_at) : ""),
      el("td", {},
        b.failed_jobs.length ? el("button", { type: "button", class: "retry", onclick: () => act(post(`/api/batches/${b.id}/retry`), retried) }, "Retry failed") : "",
        " ",
        b.cancelled_at || b.finished_at ? "" : el("button", { type: "button", class: "danger", onclick: () => act(post(`/api/batches/${b.id}/cancel`), () => `Cancelled ${b.name || b.id}.`) }, "Cancel"),
      ),
    );
    if (!b.failed_jobs.length) return [row];
    const failed = el("tr", { class: "batch-failed" }, el("td", { colspan: 8 }, "Failed jobs: ",
      ...b.failed_jobs.flatMap((uuid, i) => [i ? ", " : "", el("a", { href: "#", onclick: (event) => { event.preventDefault(); openDetail(uuid); } }, uuid)])));
    return [row, failed];
  });
  fill($("#batches tbody"), rows, 8, Boolean(lists.batches.next));
  renderPager("batches");
}

function renderSchedules(schedules) {
  const when = (time) => {
    if (!time) return "–";
    const secs = (Date.parse(time) - Date.now()) / 1000;
    return secs >= 0 ? `in ${duration(secs)}` : `${duration(-secs)} ago`;
  };
  const rows = schedules.map((s) => el("tr", { dataset: { schedule: s.name } },
    el("td", {}, s.name), el("td", {}, s.when), el("td", {}, s.queue),
    el("td", {}, when(s.next_tick)), el("td", {}, s.last_tick ? when(s.last_tick) : "never"),
    el("td", {}, s.last_outcome ?? "–"),
    el("td", { class: s.stale ? "stale" : "" }, s.stale ? "stale: no worker keeps it" : "kept"),
  ));
  fill($("#schedules tbody"), rows, 7);
}

function renderWorkers(workers) {
  const rows = workers.map((w) => el("tr", {},
    el("td", {}, w.name), el("td", {}, w.host), el("td", { class: "num" }, String(w.pid)),
    el("td", {}, w.queues.join(", ")),
    el("td", { class: "num" }, `${w.running} / ${w.concurrency}`),
    el("td", { class: "num" }, String(w.processed)), el("td", { class: "num" }, String(w.failed)),
    el("td", {}, ago(w.started_at)), el("td", {}, ago(w.last_heartbeat)),
  ));
  fill($("#workers tbody"), rows, 9);
}

// A running job's progress: a bar for a percentage (a number, or `percent` in an object),
// else the value as text; nothing for a job that reports none.
function progressCell(progress) {
  if (progress === null || progress === undefined) return "–";
  let percent = typeof progress === "number" ? progress : progress.percent;
  if (typeof percent !== "number" && typeof progress.done === "number" && progress.of) percent = (100 * progress.done) / progress.of;
  if (typeof percent !== "number") return JSON.stringify(progress);
  percent = Math.max(0, Math.min(100, Math.round(percent)));
  const done = el("span", { class: "done" });
  done.style.width = `${percent}%`;
  const bar = el("div", { class: "progress", role: "progressbar", "aria-valuenow": String(percent), "aria-valuemin": "0", "aria-valuemax": "100", title: JSON.stringify(progress) }, done);
  return el("span", {}, bar, ` ${percent}%`);
}

function renderRunning(jobs) {
  const rows = jobs.map((j) => el("tr", { dataset: { job: j.uuid } },
    el("td", {}, j.job), el("td", { class: "uuid" }, j.uuid), el("td", {}, j.queue),
    el("td", { class: "num" }, String(j.attempt)),
    el("td", {}, progressCell(j.progress), j.checkpoint == null ? "" : ` checkpoint ${JSON.stringify(j.checkpoint)}`),
    el("td", {}, j.worker), el("td", {}, ago(j.started_at)),
    el("td", {}, el("button", { type: "button", class: "danger", onclick: () => act(post(`/api/jobs/${j.uuid}/cancel`), () => `Asked ${j.job} ${j.uuid} to stop.`) }, "Cancel")),
  ));
  fill($("#running-jobs tbody"), rows, 8);
}

// A group's place in its queue's turns, as jobsctl groups says it.
function groupState(g) {
  if (g.paused) return "paused";
  if (g.state === "rotating") return "taking turns";
  if (g.state === "idle") return "idle";
  return "at a limit";
}

function renderGroups(groups) {
  const rows = groups.map((g) => {
    const path = `/api/queues/${encodeURIComponent(g.queue)}/groups/${encodeURIComponent(g.name)}`;
    const toggle = g.paused
      ? el("button", { type: "button", onclick: () => act(post(`${path}/resume`), () => `Resumed group ${g.name} of ${g.queue}.`) }, "Resume")
      : el("button", { type: "button", class: "danger", onclick: () => act(post(`${path}/pause`), () => `Paused group ${g.name} of ${g.queue}.`) }, "Pause");
    return el("tr", { dataset: { queue: g.queue, group: g.name } },
      el("td", {}, g.queue), el("td", {}, g.name),
      el("td", { class: "num" }, String(g.ready)), el("td", { class: "num" }, String(g.delayed)),
      el("td", { class: "num" }, String(g.running)),
      el("td", { class: "num" }, g.limits.concurrency === null ? "–" : String(g.limits.concurrency)),
      el("td", {}, g.limits.rate === null ? "–" : g.limits.rate),
      el("td", { class: "num" }, String(g.weight)),
      el("td", {}, groupState(g)), el("td", {}, toggle),
    );
  });
  fill($("#groups tbody"), rows, 10);
}

function renderOutbox(outboxes) {
  const rows = outboxes.map((o) => {
    const s = o.status;
    const lag = s && s.oldest_waiting_at ? (Date.parse(s.measured_at) - Date.parse(s.oldest_waiting_at)) / 1000 : 0;
    return el("tr", { dataset: { table: o.table } },
      el("td", {}, o.table), el("td", { class: "num" }, String(o.relays)),
      el("td", { class: "num" }, s ? String(s.waiting) : "?"), el("td", { class: "num" }, s ? String(s.kept) : "?"),
      el("td", {}, s ? duration(lag) : "?"), el("td", {}, s ? ago(s.measured_at) : "not measured"),
    );
  });
  fill($("#outbox tbody"), rows, 6);
}

function renderUnrunnable(types) {
  const rows = types.map((t) => el("tr", { dataset: { job: t.job }, class: t.runnable_by === 0 ? "long-wait" : "" },
    el("td", {}, t.job), el("td", {}, t.queue), el("td", {}, ago(t.since)), el("td", {}, ago(t.last_seen)),
    el("td", { class: "num" }, t.runnable_by === 0 ? "none" : String(t.runnable_by)), el("td", {}, t.reason),
  ));
  fill($("#unrunnable tbody"), rows, 6);
}

function renderUnique(locks) {
  const rows = locks.map((lock) => el("tr", {},
    el("td", {}, lock.key), el("td", {}, lock.holder),
    el("td", {}, lock.ttl_ms == null ? "never" : `${Math.round(lock.ttl_ms / 1000)} s`),
  ));
  fill($("#unique tbody"), rows, 3, Boolean(lists.unique.next));
  renderPager("unique");
}

function renderRecent(jobs) {
  const rows = jobs.map((j) => el("tr", {},
    el("td", {}, ago(j.finished_at)), el("td", {}, j.job),
    el("td", { class: "num" }, j.attempt ? String(j.attempt) : "?"),
    el("td", { class: `outcome-${j.outcome}` }, j.outcome),
    el("td", { class: "num" }, runtime(j.runtime_us)), el("td", {}, j.worker),
    el("td", { class: "exception", title: j.reason ?? "" }, j.reason ?? ""),
  ));
  fill($("#recent tbody"), rows, 7);
  renderPager("recent");
}

async function openDetail(uuid) {
  try {
    const entry = await api(`/api/failed/${encodeURIComponent(uuid)}`);
    state.detail = uuid;
    const record = entry.record;
    $("#detail-title").textContent = `${entry.display_name || entry.job} · ${record.uuid}`;
    const fields = [["Queue", record.queue], ["Connection", record.connection], ["Failed at", record.failed_at],
      ["Payload attempts", entry.attempts ?? "?"], ["Position", entry.position]];
    $("#detail-fields").replaceChildren(...fields.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))]));
    $("#detail-exception").textContent = record.exception;
    let payload = record.payload;
    try { payload = JSON.stringify(JSON.parse(payload), null, 2); } catch (_) { /* shown as stored */ }
    $("#detail-payload").textContent = payload;
    $("#detail").hidden = false;
  } catch (error) {
    setStatus(error);
  }
}

function closeDetail() {
  state.detail = null;
  $("#detail").hidden = true;
}

// Runs a change, says what it did (or why it failed) until the next change, and refreshes.
async function act(request, describe) {
  const notice = $("#notice");
  try {
    const result = await request;
    notice.textContent = describe(result);
    notice.className = "notice";
  } catch (error) {
    notice.textContent = `Failed: ${error.message}`;
    notice.className = "notice error";
  }
  await refresh();
}

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const retried = (report) => `Retried ${plural(report.retried.length, "job")}.` +
  (report.missing.length ? ` ${plural(report.missing.length, "job")} had changed meanwhile and ${report.missing.length === 1 ? "was" : "were"} left alone.` : "");
const forgotten = (result) => `Forgot ${plural(result.forgotten, "failed job")}.`;
const queueState = (result) => `${result.paused ? "Paused" : "Resumed"} ${result.queue}.`;

// Refreshes overlap when a search changes while the last poll is in flight: an answer renders
// unless a refresh started after it has rendered already, so an older answer never replaces a
// newer one, and slow answers still show.
let started = 0;
let shown = 0;

async function refresh() {
  const refreshing = ++started;
  try {
    const recent = state.recentQueue
      ? apiPage(`/api/recent?${listQuery(lists.recent, { queue: state.recentQueue })}`)
      : Promise.resolve({ items: [], next: null });
    const [overview, queues, failed, batches, schedules, workers, recentJobs, unique, outbox, running, groups, unrunnable] = await Promise.all([
      api("/api/overview"), api("/api/queues"), api(`/api/failed?${listQuery(lists.failed)}`),
      apiPage(`/api/batches?${listQuery(lists.batches)}`), api("/api/schedules"), api("/api/workers"), recent,
      apiPage(`/api/unique?${listQuery(lists.unique)}`), api("/api/outbox"), api("/api/running"), api("/api/groups"),
      api("/api/unrunnable"),
    ]);
    if (refreshing < shown) return;
    shown = refreshing;
    lists.failed.next = failed.next;
    lists.batches.next = batches.next;
    lists.recent.next = recentJobs.next;
    lists.unique.next = unique.next;
    renderOverview(overview);
    renderQueues(queues);
    renderFailed(failed);
    renderBatches(batches.items);
    renderSchedules(schedules);
    renderWorkers(workers);
    renderRunning(running);
    renderGroups(groups);
    renderOutbox(outbox);
    renderUnrunnable(unrunnable);
    renderRecent(recentJobs.items);
    renderUnique(unique.items);
    if (state.detail && !failed.jobs.some((j) => j.uuid === state.detail) && !Object.values(lists.failed.filter).some(Boolean)) closeDetail();
    setStatus(null);
  } catch (error) {
    if (refreshing >= shown) setStatus(error);
  }
}

function init() {
  wireList("failed", ["job", "queue", "text", "tag", "since"], "search");
  for (const form of document.querySelectorAll("form")) form.addEventListener("submit", (event) => event.preventDefault());
  $("#retry-matching").addEventListener("click", () => {
    if (confirm("Retry every failed job matching the search?")) act(post("/api/failed/retry", lists.failed.filter), retried);
  });
  $("#forget-matching").addEventListener("click", () => {
    if (confirm("Forget every failed job matching the search? This cannot be undone.")) act(post("/api/failed/forget", lists.failed.filter), forgotten);
  });
  $("#detail-close").addEventListener("click", closeDetail);
  const onDetail = (action, describe) => () => {
    const uuid = state.detail;
    closeDetail();
    act(post(`/api/failed/${encodeURIComponent(uuid)}/${action}`), describe);
  };
  $("#detail-retry").addEventListener("click", onDetail("retry", retried));
  $("#detail-forget").addEventListener("click", onDetail("forget", forgotten));
  $("#recent-queue").addEventListener("change", (event) => { state.recentQueue = event.target.value; lists.recent.pages = []; refresh(); });
  wireList("batches", ["name"]);
  wireList("unique", ["job"]);
  wireList("recent", ["outcome"]);
  refresh();
  setInterval(refresh, POLL_MS);
}

init();
