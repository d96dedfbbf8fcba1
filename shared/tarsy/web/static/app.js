// tarsy's pages: the session list and a session's live page.
// People sign in through Identity-Aware Proxy, which signs every request this page makes:
// the page never asks for a key. Every HTML fragment comes escaped and sanitized from the server;
// text this script makes itself goes in with textContent.
"use strict";

(function () {
  const POLL_MS = 1000;
  const MAX_BACKOFF_MS = 10000;
  const root = new URL(document.querySelector('meta[name="tarsy-root"]').content, location.href);
  const $ = (id) => document.getElementById(id);

  function apiUrl(path) {
    return new URL(path, root).toString();
  }

  function showMessage(text, kind) {
    const box = $("message");
    box.textContent = text || "";
    box.className = "message " + (kind || "error");
    box.hidden = !text;
  }

  function setConnection(text) {
    $("connection").textContent = text;
  }

  function showWho(who) {
    if (!who) return;
    $("who").textContent = "signed in as " + who.email + " · " + (who.role || "no role");
    $("who").hidden = false;
  }

  class HttpError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // One request; the proxy in front of the api signs it. A refusal says why, as the api put it.
  async function call(method, path, body) {
    const init = { method, headers: {}, cache: "no-store", credentials: "same-origin" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(apiUrl(path), init);
    let payload = null;
    try {
      payload = await response.json();
    } catch (e) {
      payload = null;
    }
    if (!response.ok) {
      let message = payload && payload.error ? payload.error.message : response.statusText;
      if (response.status === 401) message = "not signed in: " + (message || "HTTP 401");
      throw new HttpError(response.status, message || "HTTP " + response.status);
    }
    return payload;
  }

  // A placeholder ("loading…") that will not load says why instead.
  function explainPlaceholder(element, text) {
    const placeholder = element.querySelector(".empty");
    if (placeholder && placeholder.textContent === "loading…") placeholder.textContent = text;
  }

  function replaceIfChanged(element, html) {
    if (element.dataset.html !== html) {
      element.innerHTML = html;
      element.dataset.html = html;
    }
  }

  // ─── the session list ──────────────────────────────────────────────────────

  function listPage() {
    const form = $("filters");
    const params = new URLSearchParams(location.search);
    for (const name of ["status", "alert_type", "source", "actor", "action", "verdict", "limit"]) {
      if (params.get(name) && form.elements[name]) form.elements[name].value = params.get(name);
    }
    let cursor = params.get("cursor") || "";
    let refreshTimer = null;

    function query() {
      const q = new URLSearchParams();
      for (const name of ["status", "alert_type", "source", "actor", "action", "verdict", "limit"]) {
        const value = form.elements[name].value.trim();
        if (value && !(name === "limit" && value === "20")) q.set(name, value);
      }
      return q;
    }

    async function load() {
      clearTimeout(refreshTimer);
      const q = query();
      if (cursor) q.set("cursor", cursor);
      history.replaceState(null, "", "?" + q.toString());
      try {
        const page = await call("GET", "ui/data/sessions?" + q.toString());
        showWho(page.who);
        replaceIfChanged($("rows"), page.html);
        $("next-page").hidden = !page.next_cursor;
        $("next-page").dataset.cursor = page.next_cursor || "";
        $("first-page").hidden = !cursor;
        setConnection("updated " + new Date().toLocaleTimeString());
        showMessage("");
      } catch (e) {
        showMessage(e.message);
        explainPlaceholder($("rows"), e.message);
        setConnection("not connected");
      }
      // The newest page follows new sessions; an older page stays as it was read.
      if (!cursor) refreshTimer = setTimeout(load, 5000);
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      cursor = "";
      load();
    });
    form.addEventListener("reset", () => {
      cursor = "";
      setTimeout(load, 0);
    });
    $("next-page").addEventListener("click", () => {
      cursor = $("next-page").dataset.cursor;
      load();
    });
    $("first-page").addEventListener("click", () => {
      cursor = "";
      load();
    });
    load();
  }

  // ─── a session ─────────────────────────────────────────────────────────────

  function sessionPage() {
    const sessionId = document.body.dataset.session;
    const base = "sessions/" + encodeURIComponent(sessionId);
    let cursor = "";
    let timer = null;
    let failures = 0;
    let polling = false;
    let generation = 0; // a restarted poll loop ends the previous one

    function section(update) {
      let element = document.getElementById("section-" + update.id);
      if (!element) {
        element = document.createElement("section");
        element.id = "section-" + update.id;
        element.className = "execution";
        element.dataset.execution = update.id;
        const head = document.createElement("div");
        head.className = "execution-head";
        const events = document.createElement("div");
        events.className = "events";
        const live = document.createElement("div");
        live.className = "live";
        element.append(head, events, live);
      }
      return element;
    }

    function apply(update) {
      replaceIfChanged($("header"), update.header);
      replaceIfChanged($("overview"), update.overview);
      replaceIfChanged($("audit"), update.audit);
      showWho(update.who);
      replaceIfChanged($("tree"), update.tree);
      $("actions").hidden = false;
      $("action-cancel").hidden = !update.actions.cancel;
      $("action-resume").hidden = !update.actions.resume;
      $("action-score").hidden = !update.actions.score;
      $("action-again").hidden = !update.actions.again;
      $("chat-form").hidden = !update.actions.chat;
      $("feedback-form").hidden = !update.actions.feedback;
      const timeline = $("timeline");
      // Sections in the server's order (stages, then summary, chat, scoring).
      for (const one of update.sections) {
        const element = section(one);
        replaceIfChanged(element.querySelector(".execution-head"), one.head);
        replaceIfChanged(element.querySelector(".live"), one.live);
        timeline.appendChild(element);
      }
      for (const id of update.resets) {
        section({ id }).querySelector(".events").replaceChildren();
      }
      for (const event of update.events) {
        const domId = "event-" + event.id;
        if (document.getElementById(domId)) continue; // already shown: a poll asked again
        const holder = document.createElement("div");
        holder.id = domId;
        holder.className = "event-holder";
        holder.innerHTML = event.html;
        section({ id: event.section }).querySelector(".events").appendChild(holder);
      }
      document.body.dataset.status = update.status;
      document.body.dataset.finished = String(update.finished);
    }

    async function poll(mine) {
      timer = null;
      try {
        const update = await call("GET", "ui/data/" + base + "?cursor=" + encodeURIComponent(cursor));
        if (mine !== generation) return;
        apply(update);
        cursor = update.cursor; // only after the events are on the page
        failures = 0;
        if (update.finished) {
          polling = false;
          setConnection(update.status + " · up to date");
          return;
        }
        setConnection("live · " + new Date().toLocaleTimeString());
        timer = setTimeout(() => poll(mine), POLL_MS);
      } catch (e) {
        if (mine !== generation) return;
        // Nothing a retry can change: no such session, not signed in, no role to read it.
        if (e instanceof HttpError && [401, 403, 404].includes(e.status)) {
          polling = false;
          showMessage(e.message);
          explainPlaceholder($("header"), e.message);
          setConnection("not connected");
          return;
        }
        // Offline or a failing function: try again later from the same cursor.
        failures += 1;
        const wait = Math.min(MAX_BACKOFF_MS, POLL_MS * 2 ** failures);
        setConnection("reconnecting in " + Math.round(wait / 1000) + "s (" + e.message + ")");
        timer = setTimeout(() => poll(mine), wait);
      }
    }

    function startPolling() {
      if (timer) clearTimeout(timer);
      polling = true;
      generation += 1;
      poll(generation);
    }

    async function act(path, body, done) {
      showMessage("");
      try {
        await call("POST", path, body === undefined ? {} : body);
        if (done) done();
        showMessage("requested: the page follows what happens", "info");
      } catch (e) {
        showMessage(e.message);
      }
      startPolling();
    }

    $("action-cancel").addEventListener("click", () => act(base + "/cancel"));
    $("action-resume").addEventListener("click", () => act(base + "/resume"));
    $("action-score").addEventListener("click", () => act(base + "/score"));
    // The new session has its own page, beside this one: go there.
    $("action-again").addEventListener("click", async () => {
      showMessage("");
      try {
        const started = await call("POST", base + "/investigate", {});
        location.assign(encodeURIComponent(started.session_id));
      } catch (e) {
        showMessage(e.message);
      }
    });
    $("tree").addEventListener("click", (event) => {
      const button = event.target.closest("button[data-cancel-execution]");
      if (!button) return;
      const eid = button.dataset.cancelExecution;
      act(base + "/executions/" + encodeURIComponent(eid) + "/cancel");
    });
    // Right, partly right or wrong, and the real cause if the responder knows it.
    $("feedback-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const form = $("feedback-form");
      const verdict = form.elements["verdict"].value;
      if (!verdict) return;
      const cause = $("feedback-cause").value.trim();
      // The page shows what was recorded (the overview's feedback) at the next poll.
      act(base + "/feedback", { verdict, root_cause: cause || null }, () => form.reset());
    });
    $("chat-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const question = $("chat-question").value.trim();
      if (!question) return;
      act(base + "/chat", { question }, () => {
        $("chat-question").value = "";
      });
    });
    // A tab that comes back (sleep, lost network) catches up at once.
    window.addEventListener("online", () => polling && startPolling());
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible" && polling) startPolling();
    });
    startPolling();
  }

  document.addEventListener("DOMContentLoaded", () => {
    if (document.body.dataset.page === "list") listPage();
    if (document.body.dataset.page === "session") sessionPage();
  });
})();
