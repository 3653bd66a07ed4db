// sqsim console: a small single-page app over sqsim's own endpoints. Every view is built
// from DOM nodes (never HTML strings), so message bodies and names cannot inject markup.
// Nothing here receives a message: messages are shown through the side-effect-free peek.
"use strict";

const PAGE_SIZE = 50;
const REFRESH_MS = 1000;

// ---- helpers -------------------------------------------------------------------------

/** Builds an element: h("a", {href: "#"}, "text", child, ...). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function toast(text, bad) {
  const t = document.getElementById("toast");
  t.textContent = text;
  t.className = "show" + (bad ? " warn" : "");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.className = ""), 3500);
}

async function getJson(path) {
  const r = await fetch(path, { headers: { accept: "application/json" } });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || `${path}: HTTP ${r.status}`);
  return body;
}

async function postJson(path, body, method) {
  const r = await fetch(path, {
    method: method || "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  const out = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(out.error || out.message || `${path}: HTTP ${r.status}`);
  return out;
}

/** Runs an SQS action (AWS JSON shapes) in a namespace, through the console endpoint. */
async function sqs(action, params, ns) {
  // An empty account or region is the server's own.
  const q = new URLSearchParams(Object.entries({ account: ns.account, region: ns.region }).filter(([, v]) => v));
  const r = await fetch(`/_sqsim/console/sqs/${action}?${q}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params || {}),
  });
  const out = await r.json().catch(() => ({}));
  if (!r.ok) {
    const code = (out.__type || "").split("#").pop();
    throw new Error(`${code || "Error"}: ${out.message || `HTTP ${r.status}`}`);
  }
  return out;
}

function ageText(seconds) {
  if (!seconds) return "–";
  if (seconds < 60) return `${seconds.toFixed(0)} s`;
  if (seconds < 3600) return `${(seconds / 60).toFixed(1)} min`;
  if (seconds < 86400) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

function timeText(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "–";
}

// The server's clock (it may be frozen or moved ahead of real time), as last read, so that
// "3 s ago" and countdowns are relative to the time the server's timers run on.
const serverClock = { ms: null, at: 0, frozen: false };

function serverNow() {
  if (serverClock.ms === null) return Date.now();
  return serverClock.frozen ? serverClock.ms : serverClock.ms + (performance.now() - serverClock.at);
}

/** A time relative to the server's now ("12 s ago", "in 3 min"), the exact time on hover. */
function whenNode(ms) {
  if (!ms) return h("span", { class: "muted" }, "–");
  const delta = (ms - serverNow()) / 1000;
  const span = ageText(Math.max(Math.abs(delta), 1));
  const text = Math.abs(delta) < 1 ? "now" : delta > 0 ? `in ${span}` : `${span} ago`;
  const iso = new Date(ms).toISOString();
  return h("time", { datetime: iso, title: iso }, text);
}

/** A message body: one line, expanded on a click to the whole body (JSON pretty-printed),
 *  with a copy button. `open` keeps it expanded across the page's refreshes. */
function messageBody(body, open, onToggle) {
  let pretty = null;
  try {
    const v = JSON.parse(body);
    if (v !== null && typeof v === "object") pretty = JSON.stringify(v, null, 2);
  } catch (_) {
    /* not JSON */
  }
  const line = body.replace(/\s+/g, " ");
  const summary = line.length > 96 ? `${line.slice(0, 96)}…` : line;
  const copy = h("button", { class: "secondary small", type: "button", onclick: async () => {
    try {
      await navigator.clipboard.writeText(body);
      toast("Copied the body");
    } catch (_) {
      toast("The browser refused the clipboard", true);
    }
  } }, "Copy");
  const details = h("details", { class: "body" },
    h("summary", {}, h("code", {}, summary || "(empty)"),
      pretty ? h("span", { class: "muted" }, " · JSON") : null,
      h("span", { class: "muted" }, ` · ${new TextEncoder().encode(body).length} B`)),
    h("pre", { class: pretty ? "json" : "" }, pretty ?? body), copy);
  details.open = open;
  details.addEventListener("toggle", () => onToggle(details.open));
  return details;
}

/** A message attribute's value with its type: Binary as base64 with its size. */
function attributeNode(v) {
  if (v.BinaryValue !== undefined) {
    const bytes = atob(v.BinaryValue).length;
    return h("dd", {}, h("code", {}, v.BinaryValue), h("span", { class: "muted" }, ` · ${v.DataType}, ${bytes} B`));
  }
  return h("dd", {}, v.StringValue, h("span", { class: "muted" }, ` · ${v.DataType}`));
}

/** A body as text, pretty-printed when it is JSON. */
function bodyNode(body) {
  try {
    const v = JSON.parse(body);
    if (v !== null && typeof v === "object") {
      return h("pre", { class: "json" }, JSON.stringify(v, null, 2));
    }
  } catch (_) {
    /* not JSON */
  }
  return h("pre", {}, body);
}

// ---- the counts over time ------------------------------------------------------------

const HISTORY_S = 300;
const SERIES = [["visible", "Visible"], ["in_flight", "In flight"], ["delayed", "Delayed"]];

/** The queue's counts of the last five minutes, one sample a refresh, kept for the tab's
 *  life (sessionStorage) so that coming back to a queue shows its recent past. */
function history(key, sample) {
  const all = JSON.parse(sessionStorage.getItem("history") || "{}");
  const now = Date.now();
  const kept = (all[key] || []).filter((p) => now - p.t <= HISTORY_S * 1000);
  if (sample) kept.push({ t: now, ...sample });
  all[key] = kept;
  try {
    sessionStorage.setItem("history", JSON.stringify(all));
  } catch (_) {
    /* storage full: the chart starts afresh */
  }
  return kept;
}

/** A small SVG line chart of visible / in flight / delayed over the last five minutes. */
function chartNode(points) {
  const W = 600;
  const H = 120;
  const svgNs = "http://www.w3.org/2000/svg";
  const el = (tag, attrs) => {
    const e = document.createElementNS(svgNs, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    return e;
  };
  const max = Math.max(1, ...points.flatMap((p) => SERIES.map(([k]) => p[k])));
  const now = Date.now();
  // The window grows with the history, from one minute to five.
  const spanMs = Math.min(HISTORY_S * 1000, Math.max(60_000, points.length ? now - points[0].t : 0));
  const x = (t) => W - ((now - t) / spanMs) * W;
  const y = (v) => H - 4 - (v / max) * (H - 12);
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "chart", id: "count-chart",
    "aria-label": `Counts over the last ${ageText(spanMs / 1000)}, at most ${max}` });
  svg.append(el("line", { x1: 0, y1: H - 4, x2: W, y2: H - 4, class: "axis" }));
  for (const [k] of SERIES) {
    const d = points.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p[k]).toFixed(1)}`).join("");
    if (d) svg.append(el("path", { d, class: `line-${k}`, "data-series": k, "data-last": points.at(-1)?.[k] ?? 0 }));
  }
  const label = el("text", { x: 4, y: 12, class: "axis-label" });
  label.textContent = `max ${max}`;
  svg.append(label);
  return h("figure", { class: "chart" }, svg, h("figcaption", { class: "muted" },
    ...SERIES.map(([k, name]) => h("span", { class: `key-${k}` }, `■ ${name} `)), ` · last ${ageText(spanMs / 1000)}`));
}

function queueUrl(ns, name) {
  return `${location.origin}/${ns.account}/${name}`;
}

function queueHref(q) {
  return `#/queue/${encodeURIComponent(q.account)}/${encodeURIComponent(q.region)}/${encodeURIComponent(q.name)}`;
}

// ---- routing and refresh --------------------------------------------------------------

let refresher = null;
let renderToken = 0;

function every(ms, fn) {
  clearInterval(refresher);
  refresher = setInterval(() => fn().catch((e) => console.warn(e)), ms);
}

async function route() {
  clearInterval(refresher);
  const token = ++renderToken;
  const main = document.getElementById("main");
  // Which view is on screen, set once it has its data (tests and scripts wait on it).
  main.dataset.view = "";
  document.getElementById("toast").className = "";
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "queue" && parts.length >= 4) {
      await queuePage(main, { account: parts[1], region: parts[2] }, parts.slice(3).join("/"), token);
    } else if (parts[0] === "controls") {
      await controlsPage(main, token);
    } else {
      await queuesPage(main, token);
    }
  } catch (e) {
    main.replaceChildren(h("p", { class: "warn", role: "alert" }, String(e.message || e)));
  }
}

async function tickClock() {
  try {
    const c = await getJson("/_sqsim/clock");
    Object.assign(serverClock, { ms: c.now_ms, at: performance.now(), frozen: c.frozen });
    document.getElementById("clock").textContent =
      `clock ${timeText(c.now_ms)}${c.frozen ? " (frozen)" : ""}`;
  } catch (_) {
    /* the server may be restarting */
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  route();
  tickClock();
  setInterval(tickClock, REFRESH_MS);
});

// ---- queue list -----------------------------------------------------------------------

async function queuesPage(main, token) {
  const filter = h("input", {
    type: "search", id: "filter", placeholder: "name contains…", "aria-label": "Filter queues by name",
    value: sessionStorage.getItem("filter") || "",
  });
  const tbody = h("tbody", { id: "queue-rows" });
  const summary = h("p", { class: "muted", id: "queue-summary", "aria-live": "polite" });
  const table = h("table", { "aria-describedby": "queue-summary" },
    h("caption", { class: "muted", style: "text-align:left" }, "Every queue of every account and region; counts update live."),
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "Queue"), h("th", { scope: "col" }, "Account"),
      h("th", { scope: "col" }, "Region"), h("th", { scope: "col" }, "Type"),
      h("th", { scope: "col", class: "num" }, "Visible"), h("th", { scope: "col", class: "num" }, "In flight"),
      h("th", { scope: "col", class: "num" }, "Delayed"), h("th", { scope: "col", class: "num" }, "Oldest"))),
    tbody);
  const createForm = h("form", { id: "create-form", "aria-label": "Create a queue" },
    h("div", { class: "row" },
      h("label", {}, "Name", h("input", { name: "name", required: true, placeholder: "jobs, or jobs.fifo" })),
      h("label", {}, "Account", h("input", { name: "account", placeholder: "the server's", size: 14 })),
      h("label", {}, "Region", h("input", { name: "region", placeholder: "the server's", size: 12 }))),
    h("label", {}, "Attributes (JSON, as CreateQueue takes them)",
      h("input", { name: "attributes", placeholder: '{"VisibilityTimeout": "60", "DelaySeconds": "5"}' })),
    h("button", { type: "submit" }, "Create queue"));
  createForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(createForm);
    const name = String(f.get("name")).trim();
    try {
      const text = String(f.get("attributes") || "").trim();
      const attributes = Object.fromEntries(Object.entries(text ? JSON.parse(text) : {}).map(([k, v]) => [k, String(v)]));
      // A .fifo name needs FifoQueue=true, which CreateQueue does not infer: the form does.
      if (name.endsWith(".fifo") && !("FifoQueue" in attributes)) attributes.FifoQueue = "true";
      const ns = { account: String(f.get("account")).trim(), region: String(f.get("region")).trim() };
      await sqs("CreateQueue", { QueueName: name, Attributes: attributes }, ns);
      toast(`Created ${name}`);
      createForm.reset();
      await refresh();
    } catch (e) {
      toast(e.message, true);
    }
  });
  main.replaceChildren(h("h1", {}, "Queues"), h("div", { class: "row" }, filter), summary, table,
    h("section", { class: "panel", style: "margin-top:1rem", "aria-labelledby": "h-create" },
      h("h2", { id: "h-create" }, "Create a queue"), createForm));

  async function refresh() {
    const stats = await getJson("/_sqsim/stats");
    if (token !== renderToken) return;
    const f = filter.value.trim().toLowerCase();
    const queues = stats.queues
      .filter((q) => !f || q.name.toLowerCase().includes(f))
      .sort((a, b) => (a.account + a.region + a.name).localeCompare(b.account + b.region + b.name));
    tbody.replaceChildren(...queues.map((q) => h("tr", { dataset: { queue: q.name } },
      h("td", {}, h("a", { href: queueHref(q) }, q.name)),
      h("td", {}, q.account), h("td", {}, q.region),
      h("td", {}, q.name.endsWith(".fifo") ? "FIFO" : "standard"),
      h("td", { class: "num", dataset: { col: "visible" } }, q.visible),
      h("td", { class: "num", dataset: { col: "in_flight" } }, q.in_flight),
      h("td", { class: "num", dataset: { col: "delayed" } }, q.delayed),
      h("td", { class: "num" }, ageText(q.oldest_age_s)))));
    summary.textContent = `${queues.length} of ${stats.queues.length} queues`;
  }
  filter.addEventListener("input", () => {
    sessionStorage.setItem("filter", filter.value);
    refresh();
  });
  await refresh();
  main.dataset.view = "queues";
  every(REFRESH_MS, refresh);
}

// ---- one queue --------------------------------------------------------------------------

async function queuePage(main, ns, name, token) {
  const url = queueUrl(ns, name);
  const attrs = (await sqs("GetQueueAttributes", { QueueUrl: url, AttributeNames: ["All"] }, ns)).Attributes || {};
  const tags = (await sqs("ListQueueTags", { QueueUrl: url }, ns)).Tags || {};
  const sources = (await sqs("ListDeadLetterSourceQueues", { QueueUrl: url }, ns)).queueUrls || [];
  const arn = attrs.QueueArn;
  const fifo = name.endsWith(".fifo");
  // Paging follows the server's next_offset (a search page stops where its scan did), and
  // Previous goes back through the offsets seen.
  let offset = 0;
  let nextOffset = null;
  const earlier = [];
  let filter = {};
  // Bodies expanded by the reader stay expanded when the rows are drawn again.
  const expanded = new Set();
  // Messages ticked for a bulk action, kept across refreshes.
  const selected = new Set();
  const selectedInfo = h("span", { class: "muted", id: "selected-info" });
  const deleteSelected = h("button", { class: "danger", type: "button", id: "delete-selected", disabled: true, onclick: async () => {
    const ids = [...selected];
    if (!ids.length || !confirm(`Delete ${ids.length} selected message${ids.length === 1 ? "" : "s"}?`)) return;
    let done = 0;
    for (const id of ids) {
      try {
        await postJson("/_sqsim/console/delete-message", { queue_url: url, region: ns.region, message_id: id });
        done += 1;
      } catch (_) {
        /* gone already: received and deleted elsewhere */
      }
      selected.delete(id);
    }
    toast(`Deleted ${done} of ${ids.length}`);
    await refresh();
  } }, "Delete selected");
  // Move the selected to another queue of this namespace; a dead-letter queue's sources first.
  const sourceNames = sources.map((u) => decodeURIComponent(u.split("/").pop()));
  const others = (await getJson("/_sqsim/stats")).queues
    .filter((q) => q.account === ns.account && q.region === ns.region && q.name !== name)
    .map((q) => q.name)
    .sort((a, b) => (sourceNames.includes(b) - sourceNames.includes(a)) || a.localeCompare(b));
  const moveTo = h("select", { id: "move-to", "aria-label": "Queue to move the selected messages to" },
    ...others.map((n) => h("option", { value: n }, sourceNames.includes(n) ? `${n} (a source of this queue)` : n)));
  const moveSelected = h("button", { class: "secondary", type: "button", id: "move-selected", disabled: true, onclick: async () => {
    const ids = [...selected];
    const to = moveTo.value;
    if (!ids.length || !to || !confirm(`Move ${ids.length} selected message${ids.length === 1 ? "" : "s"} to ${to}?`)) return;
    try {
      const r = await postJson("/_sqsim/console/move-messages",
        { queue_url: url, region: ns.region, message_ids: ids, to_queue_url: queueUrl(ns, to) });
      ids.forEach((id) => selected.delete(id));
      onSelect();
      toast(`Moved ${r.moved} to ${to}${r.stayed ? `; ${r.stayed} stayed (in flight, delayed or gone)` : ""}`);
      await refresh();
    } catch (e) {
      toast(e.message, true);
    }
  } }, "Move selected to");
  const onSelect = () => {
    moveSelected.disabled = selected.size === 0 || !moveTo.value;
    deleteSelected.disabled = selected.size === 0;
    selectedInfo.textContent = selected.size ? `${selected.size} selected` : "";
  };

  const counters = h("dl", { id: "counters" });
  const chart = h("div", { id: "chart" });
  const historyKey = `${ns.account}/${ns.region}/${name}`;
  const messages = h("tbody", { id: "message-rows" });
  const pageInfo = h("span", { class: "muted", id: "page-info" });
  const prevPage = h("button", { class: "secondary", type: "button", id: "prev-page", onclick: () => {
    offset = earlier.pop() ?? 0;
    refresh();
  } }, "Previous");
  const nextPage = h("button", { class: "secondary", type: "button", id: "next-page", onclick: () => {
    if (nextOffset === null) return;
    earlier.push(offset);
    offset = nextOffset;
    refresh();
  } }, "Next");

  // Search: done by the server over the side-effect-free peek, a bounded scan per page.
  const searchForm = h("form", { id: "search-form", class: "row", role: "search", "aria-label": "Search messages" },
    h("label", {}, "Find", h("input", { name: "q", type: "search", id: "search-text", placeholder: "text, MessageId, name=value or group" })),
    h("label", {}, "in", h("select", { name: "field", id: "search-field" },
      h("option", { value: "q" }, "body"), h("option", { value: "id" }, "MessageId"),
      h("option", { value: "attribute" }, "attribute (name or name=value)"),
      fifo ? h("option", { value: "group" }, "message group") : null)),
    h("label", {}, "State", h("select", { name: "state", id: "search-state" },
      h("option", { value: "" }, "any"), h("option", { value: "visible" }, "visible"),
      h("option", { value: "in_flight" }, "in flight"), h("option", { value: "delayed" }, "delayed"))),
    h("button", { type: "submit" }, "Search"),
    h("button", { type: "button", class: "secondary", id: "clear-search", onclick: () => {
      searchForm.reset();
      searchForm.requestSubmit();
    } }, "Clear"));
  searchForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(searchForm);
    const text = String(f.get("q") || "").trim();
    filter = {};
    if (text) filter[f.get("field")] = text;
    if (f.get("state")) filter.state = f.get("state");
    offset = 0;
    earlier.length = 0;
    refresh();
  });
  const tasks = h("tbody", { id: "task-rows" });

  const redrive = attrs.RedrivePolicy ? JSON.parse(attrs.RedrivePolicy) : null;
  const wiring = h("dl", {},
    h("dt", {}, "Dead-letter queue"),
    h("dd", {}, redrive
      ? [arnLink(redrive.deadLetterTargetArn, ns), ` after ${redrive.maxReceiveCount} receives`]
      : "none"),
    h("dt", {}, "Dead-letter queue of"),
    h("dd", {}, sources.length ? sources.map((u) => h("div", {}, urlLink(u, ns))) : "no queue"));

  const attrList = h("dl", {}, Object.entries(attrs).sort().filter(([k]) => k !== "Policy")
    .flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  const tagList = Object.keys(tags).length
    ? h("dl", {}, Object.entries(tags).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))
    : h("p", { class: "muted" }, "No tags.");
  const policy = attrs.Policy ? bodyNode(attrs.Policy) : h("p", { class: "muted" }, "No policy.");

  const sendForm = h("form", { id: "send-form", "aria-label": "Send a message" },
    h("label", {}, "Body", h("textarea", { name: "body", rows: 3, required: true })),
    h("label", {}, "Message attributes (JSON: name → text, or → {DataType, StringValue | BinaryValue in base64})",
      h("input", { name: "attributes", placeholder: '{"kind": "test", "weight": {"DataType": "Number", "StringValue": "2.5"}}' })),
    fifo ? h("label", {}, "MessageGroupId", h("input", { name: "group", required: true })) : null,
    fifo ? h("label", {}, "MessageDeduplicationId", h("input", { name: "dedup" })) : null,
    fifo ? null : h("label", {}, "Delay (seconds)", h("input", { name: "delay", type: "number", min: 0, max: 900, value: 0 })),
    h("button", { type: "submit" }, "Send"));
  sendForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(sendForm);
    const params = { QueueUrl: url, MessageBody: f.get("body") };
    try {
      const a = (f.get("attributes") || "").trim();
      if (a) {
        // Plain values are Strings; an object gives its own type (Number, Binary, String.custom…).
        params.MessageAttributes = Object.fromEntries(Object.entries(JSON.parse(a))
          .map(([k, v]) => [k, v !== null && typeof v === "object" ? v : { DataType: "String", StringValue: String(v) }]));
      }
      if (fifo) {
        params.MessageGroupId = f.get("group");
        if (f.get("dedup")) params.MessageDeduplicationId = f.get("dedup");
      } else if (Number(f.get("delay"))) {
        params.DelaySeconds = Number(f.get("delay"));
      }
      const r = await sqs("SendMessage", params, ns);
      toast(`Sent ${r.MessageId}`);
      sendForm.reset();
      await refresh();
    } catch (e) {
      toast(e.message, true);
    }
  });

  const purge = h("button", { class: "danger", id: "purge", type: "button", onclick: async () => {
    if (!confirm(`Purge every message of ${name}?`)) return;
    try {
      await sqs("PurgeQueue", { QueueUrl: url }, ns);
      toast(`Purged ${name}`);
      await refresh();
    } catch (e) {
      toast(e.message, true);
    }
  } }, "Purge queue");

  const deleteQueue = h("button", { class: "danger", id: "delete-queue", type: "button", onclick: async () => {
    if (!confirm(`Delete the queue ${name} and every message in it?`)) return;
    try {
      await sqs("DeleteQueue", { QueueUrl: url }, ns);
      toast(`Deleted ${name}`);
      location.hash = "#/";
    } catch (e) {
      toast(e.message, true);
    }
  } }, "Delete queue");

  // The attributes SetQueueAttributes takes, as they are now; only what is changed is sent,
  // and SQS's own checks answer (the same errors as the API).
  const editable = ["VisibilityTimeout", "DelaySeconds", "MessageRetentionPeriod", "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds", "RedrivePolicy", "RedriveAllowPolicy"]
    .concat(fifo ? ["ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"] : []);
  const editForm = h("form", { id: "edit-form", "aria-label": "Edit attributes" },
    ...editable.map((k) => h("label", {}, k, h("input", { name: k, value: attrs[k] ?? "" }))),
    h("button", { type: "submit" }, "Save attributes"));
  editForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(editForm);
    const changed = Object.fromEntries(editable
      .map((k) => [k, String(f.get(k) ?? "").trim()])
      .filter(([k, v]) => v !== (attrs[k] ?? "")));
    if (!Object.keys(changed).length) return toast("Nothing changed");
    try {
      await sqs("SetQueueAttributes", { QueueUrl: url, Attributes: changed }, ns);
      toast(`Saved ${Object.keys(changed).join(", ")}`);
      route();
    } catch (e) {
      toast(e.message, true);
    }
  });

  const rate = h("input", { id: "redrive-rate", type: "number", min: 1, max: 500, placeholder: "as fast as allowed" });
  const startRedrive = sources.length
    ? h("button", { id: "start-redrive", type: "button", onclick: async () => {
      try {
        const params = { SourceArn: arn };
        if (Number(rate.value)) params.MaxNumberOfMessagesPerSecond = Number(rate.value);
        const r = await sqs("StartMessageMoveTask", params, ns);
        toast(`Redrive started (${r.TaskHandle ? "task " + r.TaskHandle.slice(0, 12) + "…" : "running"})`);
        await refresh();
      } catch (e) {
        toast(e.message, true);
      }
    } }, "Redrive messages back to their source queues")
    : null;

  main.replaceChildren(...[
    h("p", {}, h("a", { href: "#/" }, "← Queues")),
    h("h1", {}, name, h("span", { class: "muted" }, ` · ${ns.account} · ${ns.region}`)),
    h("div", { class: "grid" },
      h("section", { class: "panel", "aria-labelledby": "h-counts" }, h("h2", { id: "h-counts" }, "Now"), counters, chart,
        h("div", { class: "row", style: "margin-top:.6rem" }, purge, deleteQueue)),
      h("section", { class: "panel", "aria-labelledby": "h-wiring" }, h("h2", { id: "h-wiring" }, "Redrive wiring"), wiring,
        startRedrive ? h("div", { style: "margin-top:.6rem", class: "row" },
          h("label", {}, "Messages per second", rate), startRedrive) : null),
      h("section", { class: "panel", "aria-labelledby": "h-send" }, h("h2", { id: "h-send" }, "Send a message"), sendForm)),
    h("section", { "aria-labelledby": "h-messages" },
      h("h2", { id: "h-messages" }, "Messages"),
      h("p", { class: "muted" }, "Shown without receiving them: receive counts and visibility do not change."),
      searchForm,
      h("div", { class: "row" }, prevPage, nextPage, pageInfo),
      h("div", { class: "row", style: "justify-content:flex-end" }, selectedInfo,
        others.length ? [moveSelected, moveTo] : null, deleteSelected),
      h("table", {}, h("thead", {}, h("tr", {},
        h("th", { scope: "col" }, h("span", { class: "muted" }, "Select")),
        h("th", { scope: "col" }, "MessageId"), h("th", { scope: "col" }, "Body"),
        h("th", { scope: "col" }, "Attributes"), h("th", { scope: "col" }, "State"),
        h("th", { scope: "col", class: "num" }, "Receives"),
        fifo ? h("th", { scope: "col" }, "Group · sequence") : null,
        h("th", { scope: "col" }, h("span", { class: "muted" }, "Actions")))), messages)),
    sources.length === 0 ? null : h("section", { "aria-labelledby": "h-tasks", id: "tasks-section" },
      h("h2", { id: "h-tasks" }, "Message move tasks"),
      h("table", {}, h("thead", {}, h("tr", {},
        h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Destination"),
        h("th", { scope: "col", class: "num" }, "Moved"), h("th", { scope: "col", class: "num" }, "To move"),
        h("th", { scope: "col" }, "Started"), h("th", { scope: "col" }, ""))), tasks)),
    h("div", { class: "grid" },
      h("section", { class: "panel wide", "aria-labelledby": "h-attrs" }, h("h2", { id: "h-attrs" }, "Attributes"), attrList,
        h("details", { id: "edit-attributes" }, h("summary", {}, "Edit attributes"), editForm)),
      h("section", { class: "panel", "aria-labelledby": "h-tags" }, h("h2", { id: "h-tags" }, "Tags"), tagList),
      h("section", { class: "panel", "aria-labelledby": "h-policy" }, h("h2", { id: "h-policy" }, "Policy"), policy)),
  ].filter(Boolean));

  async function refresh() {
    const [stats, peek] = await Promise.all([
      getJson("/_sqsim/stats"),
      getJson(`/_sqsim/peek?${new URLSearchParams({ queue_url: url, region: ns.region, offset, limit: PAGE_SIZE, ...filter })}`),
    ]);
    if (token !== renderToken) return;
    const q = stats.queues.find((x) => x.name === name && x.account === ns.account && x.region === ns.region);
    if (!q) {
      counters.replaceChildren(h("dd", { class: "warn" }, "This queue no longer exists."));
      return;
    }
    const row = (label, v, col) => [h("dt", {}, label), h("dd", { dataset: { col } }, v)];
    counters.replaceChildren(
      ...row("Visible", q.visible, "visible"), ...row("In flight", q.in_flight, "in_flight"),
      ...row("Delayed", q.delayed, "delayed"), ...row("Oldest message", ageText(q.oldest_age_s), "oldest"),
      ...row("Long polls waiting", q.waiting, "waiting"), ...row("Sent", q.sent, "sent"),
      ...row("Received", q.received, "received"), ...row("Deleted", q.deleted, "deleted"),
      ...row("Moved to DLQ", q.dead_lettered, "dead_lettered"),
      ...row("Arrived from other queues", q.arrived ?? 0, "arrived"), ...row("Expired", q.expired, "expired"),
      ...row("Purged", q.purged, "purged"));
    chart.replaceChildren(chartNode(history(historyKey, { visible: q.visible, in_flight: q.in_flight, delayed: q.delayed })));
    const total = peek.total;
    nextOffset = peek.next_offset ?? null;
    const searched = Math.min(offset + peek.scanned, total);
    if (Object.keys(filter).length) {
      pageInfo.textContent = `${peek.messages.length} found on this page · searched ${searched} of ${total}`;
    } else {
      pageInfo.textContent = total
        ? `${offset + 1}–${Math.min(offset + peek.messages.length, total)} of ${total}`
        : "no messages";
    }
    prevPage.disabled = earlier.length === 0;
    nextPage.disabled = nextOffset === null;
    const rowOf = (m) => messageRow(m, url, ns, fifo, refresh, expanded, selected, onSelect);
    // A FIFO queue's page is shown by message group, each with its lock: while one of its
    // messages is in flight, no other message of the group can be received.
    const rows = fifo ? groupRows(peek.messages, rowOf) : peek.messages.map(rowOf);
    if (!rows.length) {
      const why = Object.keys(filter).length ? "Nothing found on this page." : "No messages.";
      rows.push(h("tr", { class: "empty" }, h("td", { colspan: 8, class: "muted" }, why)));
    }
    messages.replaceChildren(...rows);
    if (sources.length) {
      try {
        const t = await sqs("ListMessageMoveTasks", { SourceArn: arn, MaxResults: 10 }, ns);
        tasks.replaceChildren(...(t.Results || []).map((r) => taskRow(r, ns, refresh)));
      } catch (_) {
        /* not a dead-letter queue any more */
      }
    }
  }
  await refresh();
  main.dataset.view = `queue:${ns.account}/${ns.region}/${name}`;
  every(REFRESH_MS, refresh);
}

/** A FIFO page's rows under one header per message group (in the order groups first
 *  appear), the header saying whether the group is locked by a message in flight. */
function groupRows(messages, row) {
  const groups = new Map();
  for (const m of messages) {
    const g = m.message_group_id ?? "";
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(m);
  }
  return [...groups].flatMap(([g, ms]) => {
    const held = ms.filter((m) => m.state === "in_flight");
    const lock = held.length
      ? ["locked by a message in flight, free again ", whenNode(Math.max(...held.map((m) => m.until_ms)))]
      : "free";
    const head = h("tr", { class: "group-head", dataset: { group: g, locked: held.length > 0 } },
      h("td", { colspan: 8 }, `Group ${g} · ${ms.length} message${ms.length === 1 ? "" : "s"} on this page · `, lock));
    return [head, ...ms.map(row)];
  });
}

function messageRow(m, url, ns, fifo, refresh, expanded, selected, onSelect) {
  const attrs = Object.entries(m.message_attributes || {});
  const state = m.state === "visible"
    ? "visible"
    : [`${m.state.replace("_", " ")}, ${m.state === "delayed" ? "visible" : "again visible"} `, whenNode(m.until_ms)];
  const toggle = (open) => (open ? expanded.add(m.message_id) : expanded.delete(m.message_id));
  const pick = h("input", { type: "checkbox", "aria-label": `Select message ${m.message_id}`, checked: selected.has(m.message_id) });
  pick.addEventListener("change", () => {
    if (pick.checked) selected.add(m.message_id);
    else selected.delete(m.message_id);
    onSelect();
  });
  return h("tr", { dataset: { messageId: m.message_id } },
    h("td", {}, pick),
    h("td", {}, h("code", {}, m.message_id), h("div", { class: "muted" }, "sent ", whenNode(m.sent_timestamp))),
    h("td", { dataset: { col: "body" } }, messageBody(m.body, expanded.has(m.message_id), toggle)),
    h("td", {}, attrs.length
      ? h("dl", {}, attrs.flatMap(([k, v]) => [h("dt", {}, k), attributeNode(v)]))
      : h("span", { class: "muted" }, "–"),
      h("details", {}, h("summary", { class: "muted" }, "System attributes"), h("dl", { class: "system" },
        Object.entries({
          SentTimestamp: timeText(m.sent_timestamp),
          ApproximateFirstReceiveTimestamp: timeText(m.first_receive_timestamp),
          SenderId: m.sender_id,
          MessageDeduplicationId: m.message_deduplication_id,
          AWSTraceHeader: m.aws_trace_header,
          DeadLetterQueueSourceArn: m.dead_letter_source_arn,
        }).filter(([, v]) => v).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])))),
    h("td", { class: `state-${m.state}`, dataset: { col: "state" } }, state),
    h("td", { class: "num", dataset: { col: "receives" } }, m.receive_count),
    fifo ? h("td", { dataset: { col: "group" } }, `${m.message_group_id ?? ""} · ${m.sequence_number ?? ""}`) : null,
    h("td", {}, h("button", {
      class: "secondary", type: "button", "aria-label": `Delete message ${m.message_id}`,
      onclick: async () => {
        if (!confirm("Delete this message?")) return;
        try {
          await postJson("/_sqsim/console/delete-message", { queue_url: url, region: ns.region, message_id: m.message_id });
          toast("Deleted");
          await refresh();
        } catch (e) {
          toast(e.message, true);
        }
      },
    }, "Delete")));
}

function taskRow(t, ns, refresh) {
  const cancel = t.Status === "RUNNING"
    ? h("button", { class: "secondary", type: "button", onclick: async () => {
      try {
        await sqs("CancelMessageMoveTask", { TaskHandle: t.TaskHandle }, ns);
        toast("Cancelling the move task");
        await refresh();
      } catch (e) {
        toast(e.message, true);
      }
    } }, "Cancel")
    : null;
  return h("tr", { dataset: { status: t.Status } },
    h("td", {}, t.Status, t.FailureReason ? h("div", { class: "warn" }, t.FailureReason) : null),
    h("td", {}, t.DestinationArn ? t.DestinationArn.split(":").pop() : "source queues"),
    h("td", { class: "num", dataset: { col: "moved" } }, t.ApproximateNumberOfMessagesMoved ?? 0),
    h("td", { class: "num" }, t.ApproximateNumberOfMessagesToMove ?? "–"),
    h("td", {}, timeText(t.StartedTimestamp)),
    h("td", {}, cancel));
}

function arnLink(arn, ns) {
  const [, , , region, account, name] = arn.split(":");
  return h("a", { href: queueHref({ account: account || ns.account, region: region || ns.region, name }) }, name);
}

function urlLink(url, ns) {
  const parts = new URL(url).pathname.split("/").filter(Boolean);
  const name = parts.pop();
  const account = parts.pop() || ns.account;
  return h("a", { href: queueHref({ account, region: ns.region, name }) }, name);
}

// ---- test controls --------------------------------------------------------------------

async function controlsPage(main, token) {
  const clockState = h("p", { id: "clock-state", "aria-live": "polite" });
  const advance = h("form", { class: "row", id: "advance-form", "aria-label": "Advance the clock" },
    h("label", {}, "Advance by (seconds)", h("input", { name: "seconds", type: "number", min: 0, step: "any", value: 60 })),
    h("button", { type: "submit" }, "Advance"));
  advance.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await postJson("/_sqsim/clock", { advance_seconds: Number(new FormData(advance).get("seconds")) });
      await refresh();
      tickClock();
    } catch (e) {
      toast(e.message, true);
    }
  });
  const freeze = h("button", { type: "button", class: "secondary", id: "freeze" }, "Freeze");
  let frozen = false;
  freeze.addEventListener("click", async () => {
    try {
      await postJson("/_sqsim/clock", { freeze: !frozen });
      await refresh();
      tickClock();
    } catch (e) {
      toast(e.message, true);
    }
  });

  const faults = h("tbody", { id: "fault-rows" });
  const faultForm = h("form", { id: "fault-form", "aria-label": "Add a fault rule" },
    h("label", {}, "Rule (JSON, as POST /_sqsim/faults takes it)",
      h("textarea", { name: "rule", rows: 3, required: true }, '{"action": "SendMessage", "error": "ThrottlingException", "count": 1}')),
    h("div", { class: "row" }, h("button", { type: "submit" }, "Add rule"),
      h("button", { type: "button", class: "secondary", onclick: async () => {
        try {
          await postJson("/_sqsim/faults", {}, "DELETE");
          await refresh();
        } catch (e) {
          toast(e.message, true);
        }
      } }, "Remove every rule")));
  faultForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await postJson("/_sqsim/faults", JSON.parse(new FormData(faultForm).get("rule")));
      await refresh();
    } catch (e) {
      toast(e.message, true);
    }
  });

  const reset = h("button", { class: "danger", type: "button", id: "reset", onclick: async () => {
    if (!confirm("Reset sqsim? Every queue, message, move task and fault rule is removed.")) return;
    try {
      await postJson("/_sqsim/reset", {});
      toast("Reset done");
      await refresh();
    } catch (e) {
      toast(e.message, true);
    }
  } }, "Reset everything…");

  const workers = h("tbody", { id: "worker-rows" });
  main.replaceChildren(
    h("h1", {}, "Test controls"),
    h("section", { class: "panel", "aria-labelledby": "h-clock" }, h("h2", { id: "h-clock" }, "Clock"),
      clockState, h("div", { class: "row" }, advance, freeze)),
    h("section", { "aria-labelledby": "h-faults" }, h("h2", { id: "h-faults" }, "Fault rules"),
      h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Rule"), h("th", { scope: "col", class: "num" }, "Hits"),
        h("th", { scope: "col" }, h("span", { class: "muted" }, "Actions")))), faults),
      faultForm),
    h("section", { "aria-labelledby": "h-workers" }, h("h2", { id: "h-workers" }, "Workers"),
      h("table", {}, h("thead", {}, h("tr", {}, ...["Worker", "Delivered", "Failed", "Retried", "Released", "In flight"]
        .map((c, i) => h("th", { scope: "col", class: i ? "num" : null }, c)))), workers)),
    h("section", { "aria-labelledby": "h-reset" }, h("h2", { id: "h-reset" }, "Reset"), reset));

  async function refresh() {
    const [clock, rules, stats] = await Promise.all([
      getJson("/_sqsim/clock"), getJson("/_sqsim/faults"), getJson("/_sqsim/stats"),
    ]);
    if (token !== renderToken) return;
    frozen = !!clock.frozen;
    freeze.textContent = frozen ? "Unfreeze" : "Freeze";
    clockState.textContent = `Now ${timeText(clock.now_ms)}${frozen ? ", frozen" : ""}.`;
    const list = rules.faults || rules.rules || [];
    faults.replaceChildren(...list.map((r) => h("tr", { dataset: { ruleId: r.id } },
      h("td", {}, h("code", {}, JSON.stringify(Object.fromEntries(Object.entries(r).filter(([k]) => k !== "hits"))))),
      h("td", { class: "num" }, r.hits ?? 0),
      h("td", {}, h("button", {
        class: "secondary", type: "button", "aria-label": `Remove fault rule ${r.id}`,
        onclick: async () => {
          try {
            await postJson(`/_sqsim/faults/${encodeURIComponent(r.id)}`, undefined, "DELETE");
            toast(`Removed rule ${r.id}`);
            await refresh();
          } catch (e) {
            toast(e.message, true);
          }
        },
      }, "Remove")))));
    workers.replaceChildren(...(stats.workers.length ? stats.workers : []).map((w) => h("tr", {},
      h("td", {}, w.name), h("td", { class: "num" }, w.delivered), h("td", { class: "num" }, w.failed),
      h("td", { class: "num" }, w.retried), h("td", { class: "num" }, w.released), h("td", { class: "num" }, w.in_flight))));
    if (!stats.workers.length) workers.replaceChildren(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No workers (start them from the config file).")));
  }
  await refresh();
  main.dataset.view = "controls";
  every(REFRESH_MS, refresh);
}
