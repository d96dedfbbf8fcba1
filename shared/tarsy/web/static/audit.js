// tarsy's audit page: who did what across sessions (admins only; the api says so otherwise).
// Rows come escaped from the server; text this script makes itself goes in with textContent.
"use strict";

(function () {
  const FIELDS = ["actor", "action", "since", "until"];
  const root = new URL(document.querySelector('meta[name="tarsy-root"]').content, location.href);
  const $ = (id) => document.getElementById(id);

  function showMessage(text) {
    $("message").textContent = text || "";
    $("message").className = "message error";
    $("message").hidden = !text;
  }

  function auditPage() {
    const form = $("audit-filters");
    const params = new URLSearchParams(location.search);
    for (const name of FIELDS) {
      if (params.get(name)) form.elements[name].value = params.get(name);
    }
    let cursor = params.get("cursor") || "";

    async function load() {
      const q = new URLSearchParams();
      for (const name of FIELDS) {
        const value = form.elements[name].value.trim();
        if (value) q.set(name, value);
      }
      history.replaceState(null, "", "?" + q.toString());
      if (cursor) q.set("cursor", cursor);
      const response = await fetch(new URL("ui/data/audit?" + q.toString(), root), {
        cache: "no-store",
        credentials: "same-origin",
      });
      let page = null;
      try {
        page = await response.json();
      } catch (e) {
        page = null;
      }
      if (!response.ok) {
        const text = page && page.error ? page.error.message : "HTTP " + response.status;
        showMessage(text);
        const placeholder = $("audit-rows").querySelector(".empty");
        if (placeholder) placeholder.textContent = text;
        return;
      }
      showMessage("");
      $("audit-rows").innerHTML = page.html;
      $("audit-next").hidden = !page.next_cursor;
      $("audit-next").dataset.cursor = page.next_cursor || "";
      $("audit-first").hidden = !cursor;
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
    $("audit-next").addEventListener("click", () => {
      cursor = $("audit-next").dataset.cursor;
      load();
    });
    $("audit-first").addEventListener("click", () => {
      cursor = "";
      load();
    });
    load();
  }

  document.addEventListener("DOMContentLoaded", () => {
    if (document.body.dataset.page === "audit") auditPage();
  });
})();
