// cud console: the page side. Everything it shows comes from the console's /api (one socket request
// each, with the rights of the user who started `cuctl console`); everything it does is a POST there.
// Text from tasks and models only ever goes into textContent, never into markup.
"use strict";

const POLL_MS = 1000;      // tasks, seats and approvals
const FRAME_MS = 250;      // at most 4 frames a second per seat, while the page is visible
const RETRY_MS = 1000;     // after a failed frame

const $ = (selector, root = document) => root.querySelector(selector);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-") || key.startsWith("aria-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class ApiError extends Error {
  constructor(status, error) {
    super(error.message);
    this.status = status;
    this.kind = error.kind;
    this.source = error.source;
  }
  // "The daemon refused: ..." tells a refusal by [access] from a fault of the console or the connection.
  get shown() {
    return this.source === "daemon" ? `The daemon refused: ${this.message}` : this.message;
  }
}

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", cache: "no-store", headers: {} };
  if (method !== "GET") {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body || {});
  }
  const response = await fetch(path, init);
  const isJson = (response.headers.get("Content-Type") || "").startsWith("application/json");
  const value = isJson ? await response.json() : await response.text();
  if (!response.ok) {
    throw new ApiError(response.status, isJson && value.error ? value.error
      : { kind: "http", message: `${response.status}: ${String(value).trim()}`, source: "console" });
  }
  return value;
}

function notice(text) {
  const box = $("#notice");
  box.textContent = text || "";
  box.hidden = !text;
}

function report(node, text, failed) {
  // One status line per card: what the last button did, or why it was refused.
  const line = $(".result", node);
  line.textContent = text;
  line.classList.toggle("error", Boolean(failed));
}

async function run(node, what, request) {
  try {
    await request();
    report(node, what, false);
    poll();
  } catch (error) {
    const text = error instanceof ApiError ? error.shown : String(error);
    report(node, text, true);
    notice(text);
  }
}

// -- state: who we are, seats, tasks, approvals --------------------------------------------------
let state = null;
let polling = null;

async function poll() {
  clearTimeout(polling);
  try {
    state = await api("GET", "/api/state");
    const me = state.me;
    const rights = me.may_approve ? "may approve" : me.may_submit ? "may not approve" : "may only read";
    $("#who").textContent = `${me.peer.name} (uid ${me.peer.uid}) · ${rights} · cud ${me.version}`;
    $("#status").textContent = "connected";
    $("#status").className = "ok";
    draw();
  } catch (error) {
    $("#status").textContent = error instanceof ApiError ? error.shown : `console unreachable: ${error}`;
    $("#status").className = "bad";
  }
  polling = setTimeout(poll, POLL_MS);
}

function draw() {
  drawApprovals(state.approvals, state.approvals_error);
  drawSeats(state.seats, state.seats_error);
  drawTasks(state.tasks, state.tasks_error);
  drawTask();
}

function taskById(id) {
  return (state && state.tasks.find((t) => t.id === id)) || null;
}

// -- approvals -------------------------------------------------------------------------------------
const approvalCards = new Map();

function drawApprovals(approvals, error) {
  const list = $("#approvals");
  const seen = new Set();
  for (const approval of approvals) {
    seen.add(approval.id);
    if (!approvalCards.has(approval.id)) {
      const card = approvalCard(approval);
      approvalCards.set(approval.id, card);
      list.append(card);
    }
  }
  for (const [id, card] of approvalCards) {
    if (!seen.has(id)) { card.remove(); approvalCards.delete(id); }
  }
  $("#no-approvals").hidden = approvals.length > 0 && !error;
  $("#no-approvals").textContent = error ? `Cannot list approvals: ${error}` : "None.";
}

function approvalCard(a) {
  // The picture on the left, as in the report; what is asked and the buttons beside it.
  const task = taskById(a.task_id);
  const card = el("article", { class: "approval", "data-id": String(a.id), "data-task": String(a.task_id) });
  const side = el("div", { class: "side" });
  if (task) side.append(el("p", { class: "prompt text" }, el("span", { class: "label" }, "Task: "), task.prompt));
  if (a.checks.length) {
    // A budget approval (docs/budgets.md) asks for more money or tokens, not about an action.
    side.append(el("p", { class: "label" }, a.kind === "budget" ? "Budget:" : "Safety checks:"), el("ul", { class: "checks" },
      ...a.checks.map((c) => el("li", {}, el("b", {}, c.code || "check"), `: ${c.message || ""}`))));
  }
  if (a.words.length) {
    side.append(el("p", { class: "label" }, a.words.length === 1 ? "The action to run:" : "The actions to run:"));
    side.append(el("ol", { class: "actions" }, ...a.words.map((w) => el("li", {}, el("code", {}, w)))));
  }
  let picture;
  if (a.screenshot) {
    const path = `/api/tasks/${a.task_id}/images/${encodeURIComponent(a.screenshot)}`;
    picture = el("figure", {},
      el("div", { class: "frame" },
        el("img", { class: "shot", src: path, alt: `The screen approval ${a.id} is about (${a.screenshot})` }),
        el("img", { class: "marks", src: `/api/approvals/${a.id}/marks.svg`, alt: "" })),
      el("figcaption", {}, `${a.screenshot}: the screen the model acted on, its targets marked`));
  } else {
    picture = el("p", { class: "empty" }, "No screenshot is bound to this approval.");
  }
  const reason = el("input", { type: "text", name: "reason", maxLength: 4096, placeholder: "Reason (optional)" });
  const approve = el("button", { type: "button", class: "approve" }, "Approve");
  const deny = el("button", { type: "button", class: "deny" }, "Deny");
  const cancel = el("button", { type: "button", class: "cancel" }, "Cancel task");
  approve.addEventListener("click", () => run(card, `approval ${a.id} approved`,
    () => api("POST", `/api/approvals/${a.id}/approve`)));
  deny.addEventListener("click", () => run(card, `approval ${a.id} denied`,
    () => api("POST", `/api/approvals/${a.id}/deny`, reason.value.trim() ? { reason: reason.value } : {})));
  cancel.addEventListener("click", () => run(card, `task ${a.task_id}: cancel requested`,
    () => api("POST", `/api/tasks/${a.task_id}/cancel`)));
  side.append(el("div", { class: "controls" }, approve, deny, cancel), el("label", {}, reason),
    el("p", { class: "result", role: "status" }));
  card.append(el("h3", {}, `Approval ${a.id} · task ${a.task_id} · seat ${a.seat || "?"} · ${a.kind}`),
    el("div", { class: "body" }, picture, side));
  return card;
}

// -- seats: the live screens, pause / resume / take over --------------------------------------------
const seatCards = new Map();

function drawSeats(seats, error) {
  const list = $("#seats");
  const seen = new Set();
  for (const seat of seats) {
    seen.add(seat.name);
    let card = seatCards.get(seat.name);
    if (!card) {
      card = seatCard(seat.name);
      seatCards.set(seat.name, card);
      list.append(card);
      frames(card, seat.name);  // runs while the card is on the page
    }
    updateSeat(card, seat);
  }
  for (const [name, card] of seatCards) {
    if (!seen.has(name)) { card.remove(); seatCards.delete(name); }
  }
  if (error) notice(`Cannot list seats: ${error}`);
}

function seatTask(seat) {
  // The seat's task: the one it runs, or (paused tasks keep their seat) a paused one on it.
  if (seat.task) return taskById(seat.task);
  return (state.tasks.find((t) => t.seat === seat.name && t.state === "paused")) || null;
}

function seatCard(name) {
  const card = el("article", { class: "seat", "data-seat": name });
  const screen = el("div", { class: "screen", tabIndex: 0, "aria-label": `${name}'s screen` },
    el("img", { class: "live", alt: `${name}'s screen, live` }));
  const text = el("input", { type: "text", class: "type-text", placeholder: "Text to type, exactly" });
  const tools = el("div", { class: "takeover-tools", hidden: true },
    el("label", {}, text),
    el("button", { type: "button", "data-do": "type" }, "Type"),
    ...["Enter", "Tab", "Backspace", "Escape"].map((key) =>
      el("button", { type: "button", "data-key": key }, key)),
    el("span", { class: "hint" }, "Click on the screen to click there; keys typed on it are sent too."));
  card.append(
    el("h3", {}, el("span", { class: "name" }, name), " ", el("span", { class: "state" }),
      " ", el("span", { class: "task" })),
    el("div", { class: "controls" },
      el("button", { type: "button", "data-do": "pause" }, "Pause"),
      el("button", { type: "button", "data-do": "resume" }, "Resume"),
      el("button", { type: "button", "data-do": "takeover" }, "Take over"),
      el("button", { type: "button", "data-do": "handback" }, "Hand back")),
    tools, screen, el("p", { class: "result", role: "status" }));
  card.dataset.frames = "0";
  const act = (action) => queueAction(card, action);
  $('[data-do="pause"]', card).addEventListener("click", () => controlTask(card, "pause"));
  $('[data-do="resume"]', card).addEventListener("click", () => controlTask(card, "resume"));
  $('[data-do="takeover"]', card).addEventListener("click", () => takeOver(card, true));
  $('[data-do="handback"]', card).addEventListener("click", () => {
    takeOver(card, false);
    controlTask(card, "resume");
  });
  $('[data-do="type"]', card).addEventListener("click", () => {
    if (text.value) act({ type: "type", text: text.value });
    text.value = "";
  });
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); $('[data-do="type"]', card).click(); }
  });
  for (const button of card.querySelectorAll("[data-key]")) {
    button.addEventListener("click", () => act({ type: "keypress", keys: [button.dataset.key] }));
  }
  listenForInput(card, screen, act);
  return card;
}

function updateSeat(card, seat) {
  const task = seatTask(seat);
  card.dataset.task = task ? String(task.id) : "";
  card.dataset.taskState = task ? task.state : "";
  $(".state", card).textContent = seat.state;
  $(".state", card).className = `state ${seat.state}`;
  $(".task", card).textContent = task
    ? `task ${task.id} (${task.state}${task.doing ? ": " + task.doing : ""})` : seat.error || "no task";
  const live = task && ["running", "awaiting_approval", "paused"].includes(task.state);
  $('[data-do="pause"]', card).disabled = !live || task.state === "paused";
  $('[data-do="resume"]', card).disabled = !task || task.state !== "paused";
  $('[data-do="takeover"]', card).disabled = !task || task.state !== "paused" || card.classList.contains("taking");
  $('[data-do="handback"]', card).disabled = !task || task.state !== "paused";
  if (card.classList.contains("taking") && (!task || task.state !== "paused")) takeOver(card, false);
}

function controlTask(card, kind) {
  const id = Number(card.dataset.task);
  if (!id) return;
  run(card, kind === "pause" ? `task ${id}: pause requested (it stops after its current actions)`
    : `task ${id}: resumed`, () => api("POST", `/api/tasks/${id}/${kind}`));
}

function takeOver(card, on) {
  card.classList.toggle("taking", on);
  $(".takeover-tools", card).hidden = !on;
  $('[data-do="takeover"]', card).disabled = on;
  if (on) $(".screen", card).focus();
}

// Actions of a person go one at a time, in order: each waits for the daemon's answer to the one before.
function queueAction(card, action) {
  const id = Number(card.dataset.task);
  if (!card.classList.contains("taking") || !id) return;
  const previous = card.actions || Promise.resolve();
  card.actions = previous.then(() => api("POST", `/api/tasks/${id}/act`, { action }))
    .then(() => report(card, `done: ${action.type}`, false))
    .catch((error) => {
      const text = error instanceof ApiError ? error.shown : String(error);
      report(card, text, true);
      notice(text);
    });
}

// Browser key names the daemon's key table knows as they are (it matches them case-insensitively).
const KEYS = new Set(["Enter", "Tab", "Backspace", "Escape", "Delete", "Insert", "Home", "End", "PageUp",
  "PageDown", "ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8",
  "F9", "F10", "F11", "F12"]);

function listenForInput(card, screen, act) {
  const img = $("img.live", screen);
  const at = (event) => {
    const box = img.getBoundingClientRect();
    const x = Math.round((event.clientX - box.left) * img.naturalWidth / box.width);
    const y = Math.round((event.clientY - box.top) * img.naturalHeight / box.height);
    return { x: Math.min(Math.max(x, 0), img.naturalWidth - 1), y: Math.min(Math.max(y, 0), img.naturalHeight - 1) };
  };
  img.addEventListener("click", (event) => act({ type: "click", button: "left", ...at(event) }));
  img.addEventListener("contextmenu", (event) => {
    if (!card.classList.contains("taking")) return;
    event.preventDefault();
    act({ type: "click", button: "right", ...at(event) });
  });
  img.addEventListener("wheel", (event) => {
    if (!card.classList.contains("taking")) return;
    event.preventDefault();
    act({ type: "scroll", ...at(event), scroll_x: Math.round(event.deltaX), scroll_y: Math.round(event.deltaY) });
  }, { passive: false });
  screen.addEventListener("keydown", (event) => {
    if (!card.classList.contains("taking") || event.isComposing) return;
    const mods = [event.ctrlKey && "ctrl", event.altKey && "alt", event.metaKey && "super"].filter(Boolean);
    if (event.key.length === 1 && !mods.length) {
      act({ type: "type", text: event.key });
    } else if (KEYS.has(event.key) || (event.key.length === 1 && mods.length)) {
      act({ type: "keypress", keys: [...mods, ...(event.shiftKey ? ["shift"] : []), event.key] });
    } else {
      return;
    }
    event.preventDefault();
  });
}

async function frames(card, name) {
  // Fetch the next frame only once the last one is shown: a slow link lowers the rate, never piles up.
  const img = $("img.live", card);
  let shown = null;
  while (card.isConnected) {
    if (document.visibilityState !== "visible") {
      await new Promise((resolve) => document.addEventListener("visibilitychange", resolve, { once: true }));
      continue;
    }
    const started = performance.now();
    try {
      const response = await fetch(`/api/seats/${encodeURIComponent(name)}/screen.png`,
        { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) {
        const body = await response.json().catch(() => ({ error: { message: String(response.status) } }));
        throw new ApiError(response.status, body.error);
      }
      const url = URL.createObjectURL(await response.blob());
      // Decoded off-page first: the shown picture is never blank (naturalWidth 0) while the next one loads.
      const next = new Image();
      next.src = url;
      await next.decode();
      img.src = url;
      if (shown) URL.revokeObjectURL(shown);
      shown = url;
      card.dataset.frames = String(Number(card.dataset.frames) + 1);
      card.classList.remove("stale");
    } catch (error) {
      card.classList.add("stale");
      img.title = error instanceof ApiError ? error.shown : String(error);
      await sleep(RETRY_MS);
    }
    await sleep(Math.max(0, FRAME_MS - (performance.now() - started)));
  }
}

// -- tasks -----------------------------------------------------------------------------------------
let selected = null;

function drawTasks(tasks, error) {
  const body = $("#tasks tbody");
  body.replaceChildren(...tasks.map((t) => {
    const row = el("tr", { "data-id": String(t.id), class: t.id === selected ? "selected" : "" },
      el("td", {}, String(t.id)),
      el("td", {}, el("span", { class: `state ${t.state}` }, t.state)),
      el("td", {}, t.seat || "*"),
      el("td", {}, `${t.steps}/${t.max_steps}`),
      el("td", {}, t.verdict ? el("span", { class: `verdict ${t.verdict.verdict}`, title: t.verdict_words },
        `${t.verdict.verdict} ${Number(t.verdict.score).toFixed(2)}`) : ""),
      el("td", { class: "cost" }, t.cost_text || ""),
      el("td", { class: "prompt" }, t.prompt),
      el("td", {}, t.doing || t.held || ""));
    row.addEventListener("click", () => select(t.id));
    return row;
  }));
  $("#no-tasks").hidden = tasks.length > 0 && !error;
  $("#no-tasks").textContent = error ? `Cannot list tasks: ${error}` : "No tasks yet.";
}

let stream = null;

function select(id) {
  if (stream) stream.close();
  selected = id;
  const section = $("#task");
  section.hidden = false;
  section.dataset.id = String(id);
  $("#report-link").href = `/tasks/${id}/report`;
  report(section, "", false);
  const list = $("#events");
  list.replaceChildren();
  const video = { started: false, finished: false };
  hideVideo();
  stream = new EventSource(`/api/tasks/${id}/events`);
  stream.addEventListener("open", () => list.replaceChildren());  // a reconnect replays from the start
  stream.addEventListener("event", (message) => {
    const { event, line, video_t: at } = JSON.parse(message.data);
    const item = el("li", { class: `event ${event.kind}`, "data-kind": event.kind }, line);
    if (typeof at === "number") {
      const button = el("button", { type: "button", class: "seek", title: "see this moment in the video" },
        `▶ ${clock(at)}`);
      button.addEventListener("click", () => seekVideo(at));
      item.append(button);
    }
    list.append(item);
    if (event.kind === "video_started") video.started = true;
    if (event.kind === "video_finished") {
      video.finished = true;
      showVideo(id, `${event.data.file}: ${event.data.seconds.toFixed(1)} s, ${event.data.bytes} bytes`);
    }
  });
  for (const kind of ["end", "failure"]) {
    stream.addEventListener(kind, (message) => {
      if (kind === "end" && video.started && !video.finished) {
        showVideo(id, "cut short (the daemon or ffmpeg stopped): it plays up to its last whole second");
      }
      stream.close();
      const value = JSON.parse(message.data);
      list.append(el("li", { class: kind === "end" ? "closing" : "closing failure" }, kind === "end"
        ? `— follow ended: task ${value.id} ${value.state}` : `— cannot follow: ${value.message}`));
    });
  }
  drawTask();
  if (state) drawTasks(state.tasks, state.tasks_error);
}

// -- the task's video: shown once it is finished (or known to be cut short) --------------------
function clock(seconds) {
  const minutes = Math.floor(seconds / 60);
  return `${minutes}:${(seconds - minutes * 60).toFixed(1).padStart(4, "0")}`;
}

function hideVideo() {
  const player = $("#task-video");
  player.removeAttribute("src");
  player.load();
  $("#task-video-box").hidden = true;
}

function showVideo(id, note) {
  const player = $("#task-video");
  player.src = `/api/tasks/${id}/video`;
  $("#task-video-note").textContent = `Video · ${note}`;
  $("#task-video-box").hidden = false;
}

function seekVideo(seconds) {
  const player = $("#task-video");
  if ($("#task-video-box").hidden) return;  // not recorded yet: nothing to seek
  player.currentTime = seconds;
  player.scrollIntoView({ block: "nearest" });
}

function drawTask() {
  if (selected === null) return;
  const task = taskById(selected);
  const section = $("#task");
  $("#task-title").textContent = task ? `Task ${task.id} · ${task.state} · seat ${task.seat || "*"}` : `Task ${selected}`;
  $("#task-prompt").textContent = task ? task.prompt : "";
  $("#task-verdict").hidden = !(task && task.verdict_words);
  $("#task-verdict-line").textContent = task && task.verdict_words ? `Verdict: ${task.verdict_words}` : "";
  $("#task-checks").replaceChildren(...(task ? task.check_words : []).map((line) => el("li", {}, line)));
  const final = !task || ["succeeded", "failed", "cancelled", "interrupted", "budget_exceeded", "stuck"].includes(task.state);
  $('[data-do="pause"]', section).disabled = final || task.state === "paused" || task.state === "queued";
  $('[data-do="resume"]', section).disabled = !task || task.state !== "paused";
  $('[data-do="cancel"]', section).disabled = final;
}

for (const kind of ["pause", "resume", "cancel"]) {
  $(`#task [data-do="${kind}"]`).addEventListener("click", () => {
    const section = $("#task");
    const id = Number(section.dataset.id);
    run(section, `task ${id}: ${kind} requested`, () => api("POST", `/api/tasks/${id}/${kind}`));
  });
}

poll();
