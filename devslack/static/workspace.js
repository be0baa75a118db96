// The local workspace's page (devslack/browser.py serves it): renders the HTML fragments the
// server builds for one person and turns what they do — a slash command, a click, a pick, a
// form — into /api calls, which the server sends to the bot as Slack's own signed requests.
// No build step, no library: plain browser JavaScript.
"use strict";

const params = new URLSearchParams(location.search);
const token = params.get("token") || "";
const ui = { user: params.get("as") || "", place: params.get("place") || "", thread: null,
             version: -1, modalKey: null, shownPlace: null };
const $ = (selector) => document.querySelector(selector);

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;",
                                                   '"': "&quot;", "'": "&#39;" }[c]));
}

async function api(path, body) {
  const init = { headers: { "X-Devslack-Token": token } };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch("/api/" + path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function toast(text) {
  const box = $("#toast");
  box.textContent = text;
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, 6000);
}

// -- state -----------------------------------------------------------------------------------

let fetching = false;
let again = false;

async function refresh() {
  if (fetching) { again = true; return; }
  fetching = true;
  try {
    do {
      again = false;
      const asked = { user: ui.user, place: ui.place, thread: ui.thread || "" };
      const state = await api("state?" + new URLSearchParams(asked));
      // Someone switched person or place meanwhile: this answer is for the old view.
      if (asked.user !== ui.user || asked.place !== ui.place) again = true;
      else render(state);
    } while (again);
  } catch (error) {
    toast(String(error.message || error));
  } finally {
    fetching = false;
  }
}

function setHTML(element, markup) {
  if (element.dataset.shown !== markup) {  // untouched when unchanged: selects keep their state
    element.innerHTML = markup;
    element.dataset.shown = markup;
    return true;
  }
  return false;
}

function render(state) {
  ui.user = state.me;
  ui.place = state.place;
  ui.version = state.version;
  const person = $("#person");
  const people = state.people.map((p) => `<option value="${esc(p.id)}">${esc(p.name)} — `
    + `${esc(p.real_name)}${p.approver ? " · approver" : ""}</option>`).join("");
  setHTML(person, people);
  person.value = state.me;
  setHTML($("#sidebar"), state.sidebar);
  setHTML($("#title"), state.title);
  $("#status").textContent = state.status;
  setHTML($("#controls"), state.controls.map((c) => `<button type="button" class="btn control" `
    + `data-line="${esc(c.line)}" title="${esc(c.line)}">${esc(c.label)}</button>`).join(""));
  const running = $("#running");
  running.hidden = state.running.length === 0;
  running.textContent = state.running.map((line) => `⏳ ${line} …`).join("   ");
  const home = state.place === "home";
  $("#compose").placeholder = `Message ${state.label} — /cluster …, or sim advance 1h`;
  $("#home").hidden = !home;
  $("#messages").hidden = home;
  $("#composer").hidden = home;  // as in Slack: the Home tab has no composer
  if (home) setHTML($("#home"), state.home);
  else showMessages(state.messages, state.place !== ui.shownPlace);
  ui.shownPlace = state.place;
  const thread = $("#thread");
  thread.hidden = !state.thread;
  if (!state.thread) ui.thread = null;
  setHTML(thread, state.thread);
  showModal(state.modal);
  const at = new URLSearchParams({ token, as: state.me, place: state.place });
  history.replaceState(null, "", "?" + at);
  document.body.dataset.version = String(state.version);
  document.body.dataset.viewer = state.me;
  document.body.dataset.viewing = state.place;
}

function showMessages(markup, arrived) {
  const box = $("#messages");
  const atBottom = arrived || box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  if (setHTML(box, markup) && atBottom) box.scrollTop = box.scrollHeight;
}

function showModal(modal) {
  const layer = $("#modal-layer");
  const key = modal ? modal.id + "/" + modal.hash : null;
  if (key === ui.modalKey) return;  // the same view: keep what was typed into it
  ui.modalKey = key;
  layer.hidden = !modal;
  layer.innerHTML = modal ? modal.html : "";
  const first = layer.querySelector("[data-input]");
  if (first && first.focus) first.focus();
}

// -- doing things ------------------------------------------------------------------------------

function surfaceOf(element) {
  return element.closest("[data-surface]");
}

function valueOf(element) {
  const kind = element.dataset.kind;
  if (kind === "checkboxes") {
    return [...element.querySelectorAll("input:checked")].map((i) => i.value);
  }
  if (kind === "radio_buttons") {
    const picked = element.querySelector("input:checked");
    return picked ? picked.value : null;
  }
  if (element.multiple) return [...element.selectedOptions].map((o) => o.value);
  if (kind === "datetimepicker") {
    return element.value ? Math.floor(new Date(element.value + "Z").getTime() / 1000) : null;
  }
  return element.value === "" ? null : element.value;
}

function formValues(surface) {
  const values = {};
  for (const element of surface.querySelectorAll("[data-input]")) {
    const block = (values[element.dataset.block] ||= {});
    block[element.dataset.action] = valueOf(element);
  }
  return values;
}

function confirmed(dialog) {
  const layer = $("#confirm-layer");
  const style = dialog.style === "danger" ? "btn-danger" : "btn-primary";
  layer.innerHTML = `<div class="dialog" role="dialog" aria-modal="true">`
    + `<div class="dialog-title">${esc(dialog.title)}</div>`
    + `<div class="dialog-text">${dialog.text}</div><div class="dialog-foot">`
    + `<button type="button" class="btn" data-answer="no">${esc(dialog.deny)}</button>`
    + `<button type="button" class="btn ${style}" data-answer="yes">${esc(dialog.confirm)}`
    + `</button></div></div>`;
  layer.hidden = false;
  return new Promise((resolve) => {
    layer.onclick = (event) => {
      const answer = event.target.closest("[data-answer]");
      if (!answer) return;
      layer.hidden = true;
      layer.innerHTML = "";
      resolve(answer.dataset.answer === "yes");
    };
  });
}

async function act(element, value) {
  const surface = surfaceOf(element);
  if (element.dataset.confirm && !(await confirmed(JSON.parse(element.dataset.confirm)))) {
    if (element.tagName === "SELECT") element.selectedIndex = 0;
    return;
  }
  const body = { user: ui.user, block: element.dataset.block, action: element.dataset.action };
  if (value !== undefined) body.value = value;
  if (surface.dataset.surface === "view") {
    body.view = surface.dataset.view;
    body.values = formValues(surface);
  } else {
    body.channel = surface.dataset.channel;
    body.ts = surface.dataset.ts;
  }
  if (element.dataset.url) window.open(element.dataset.url, "_blank", "noopener");
  if (element.dataset.kind === "overflow") element.selectedIndex = 0;  // a menu, not a value
  element.classList.add("pressed");
  try {
    await api("click", body);
  } catch (error) {
    toast(String(error.message || error));
  } finally {
    element.classList.remove("pressed");
    refresh();
  }
}

async function submitModal(button) {
  const surface = surfaceOf(button);
  button.disabled = true;
  try {
    const answer = await api("submit", { user: ui.user, view: surface.dataset.view,
                                         values: formValues(surface) });
    for (const block of surface.querySelectorAll(".block.input")) {
      const error = block.querySelector(".error");
      const text = answer.errors[block.dataset.blockId];
      error.hidden = !text;
      error.textContent = text || "";
      block.classList.toggle("has-error", Boolean(text));
    }
  } catch (error) {
    toast(String(error.message || error));
  } finally {
    button.disabled = false;
    refresh();
  }
}

async function run(text) {
  try {
    await api("command", { user: ui.user, place: ui.place, text });
  } catch (error) {
    toast(String(error.message || error));
  }
  refresh();
}

function go(place) {
  ui.place = place;
  ui.thread = null;
  if (place === "home") api("home", { user: ui.user }).catch((e) => toast(e.message));
  refresh();
}

document.addEventListener("click", (event) => {
  const target = event.target.closest(
    "[data-place], [data-thread], [data-thread-close], [data-line], [data-close], "
    + "[data-submit], button[data-action]");
  if (!target) return;
  if (target.dataset.place !== undefined) go(target.dataset.place);
  else if (target.dataset.thread !== undefined) { ui.thread = target.dataset.thread; refresh(); }
  else if (target.dataset.threadClose !== undefined) { ui.thread = null; refresh(); }
  else if (target.dataset.line !== undefined) run(target.dataset.line);
  else if (target.dataset.close !== undefined) {
    api("close", { user: ui.user, view: surfaceOf(target).dataset.view })
      .catch((e) => toast(e.message)).finally(refresh);
  } else if (target.dataset.submit !== undefined) submitModal(target);
  else if (target.dataset.live !== undefined || target.dataset.dispatch !== undefined) {
    act(target);
  }
});

document.addEventListener("change", (event) => {
  const element = event.target.closest("[data-action]");
  if (!element || (element.dataset.live === undefined && element.dataset.dispatch === undefined)) {
    return;
  }
  if (element.tagName === "BUTTON") return;
  act(element, valueOf(element));
});

$("#person").addEventListener("change", (event) => {
  ui.user = event.target.value;
  ui.thread = null;
  if (ui.place.startsWith("D")) ui.place = "dm";  // their own DM with the app
  go(ui.place);  // on the Home tab: the app hears that this person opened it
});

$("#composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("#compose");
  const text = input.value.trim();
  input.value = "";
  if (text) run(text);
});

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && !$("#confirm-layer").hidden) {
    $("#confirm-layer [data-answer=no]").click();
  }
});

// Live: the server pushes its version on every change; polling backs the stream up.
const events = new EventSource("/api/events?token=" + encodeURIComponent(token));
events.onmessage = (event) => { if (Number(event.data) !== ui.version) refresh(); };
setInterval(refresh, 5000);
go(ui.place);
