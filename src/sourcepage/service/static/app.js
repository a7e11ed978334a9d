// sourcepage reviewer page: text tabs and a remembered reviewer name. No dependencies.
(function () {
  "use strict";
  document.querySelectorAll(".tabs").forEach(function (bar) {
    bar.addEventListener("click", function (ev) {
      var tab = ev.target.closest(".tab");
      if (!tab) return;
      bar.querySelectorAll(".tab").forEach(function (t) {
        var on = t === tab;
        t.classList.toggle("active", on);
        t.setAttribute("aria-selected", on ? "true" : "false");
        var panel = document.getElementById(t.dataset.tab);
        if (panel) panel.hidden = !on;
      });
    });
  });
  // scroll the quoted sentence (else the evidence passage) into view in the page text
  document.querySelectorAll(".page-text").forEach(function (pre) {
    var first = pre.querySelector("mark.quote") || pre.querySelector("mark.ev");
    if (first) pre.scrollTop = Math.max(0, first.offsetTop - pre.offsetTop - 40);
  });
  document.querySelectorAll("[data-remember]").forEach(function (input) {
    var key = "sourcepage." + input.dataset.remember;
    try {
      if (!input.value) input.value = localStorage.getItem(key) || "";
      input.form.addEventListener("submit", function () { localStorage.setItem(key, input.value); });
    } catch (e) { /* storage unavailable */ }
  });
  // a refusal has no evidence pages: grey them out
  document.querySelectorAll("form").forEach(function (form) {
    var radios = form.querySelectorAll("input[name=decision]");
    var boxes = form.querySelectorAll("input[name=pages]");
    function sync() {
      var refuse = form.querySelector("input[name=decision][value=refuse]");
      boxes.forEach(function (b) { b.disabled = !!(refuse && refuse.checked); });
    }
    radios.forEach(function (r) { r.addEventListener("change", sync); });
    sync();
  });
  // the desk's draft, beside the empty boxes: a button copies a draft quote into the quotes
  // (a line of its own, once) or the draft into the answer (after what is there)
  document.querySelectorAll("button[data-copy-from]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var from = document.getElementById(btn.dataset.copyFrom);
      var to = btn.form && btn.form.querySelector("textarea[name=" + btn.dataset.copyTo + "]");
      if (!from || !to) return;
      var text = from.textContent.replace(/\s+/g, " ").trim();
      var lines = to.value.split("\n").map(function (l) { return l.trim(); });
      if (btn.dataset.copyTo === "quotes" && lines.indexOf(text) >= 0) return;
      to.value = to.value.trim() ? to.value.replace(/\s+$/, "") + (btn.dataset.copyTo === "quotes" ? "\n" : " ") + text : text;
      btn.classList.add("copied");
      to.dispatchEvent(new Event("input"));
    });
  });
  // the desk's decision form keeps what was typed through a sign-in: saved on submit, put
  // back when the server sends the reviewer back with ?restore=1 (the session had ended)
  document.querySelectorAll("form[data-draft]").forEach(function (form) {
    var key = "sourcepage.draft." + form.dataset.draft;
    function fields() { return form.querySelectorAll("textarea, select, input[type=radio], input[type=checkbox], input[type=text]"); }
    form.addEventListener("submit", function () {
      var saved = {};
      fields().forEach(function (f) {
        if (f.type === "radio" || f.type === "checkbox") saved[f.name + "=" + f.value] = f.checked;
        else saved[f.name] = f.value;
      });
      try { sessionStorage.setItem(key, JSON.stringify(saved)); } catch (e) { /* storage unavailable */ }
    });
    if (!/[?&]restore=1/.test(location.search)) return;
    var saved = null;
    try { saved = JSON.parse(sessionStorage.getItem(key) || "null"); } catch (e) { saved = null; }
    if (!saved) return;
    fields().forEach(function (f) {
      var k = (f.type === "radio" || f.type === "checkbox") ? f.name + "=" + f.value : f.name;
      if (!(k in saved)) return;
      if (f.type === "radio" || f.type === "checkbox") f.checked = saved[k]; else f.value = saved[k];
    });
    form.querySelectorAll("input[name=decision]").forEach(function (r) { r.dispatchEvent(new Event("change")); });
    form.dataset.restored = "1";
    form.scrollIntoView({ block: "start" });  // back at the filled form, not the page's top
  });
  // the page view: scroll the page image's frame to the highlighted quote (the image
  // response says where it starts, X-Highlight-Top; read from the browser's cache)
  document.querySelectorAll("img[data-scroll-to-highlight]").forEach(function (img) {
    var frame = img.closest(".image-frame");
    function go() {
      if (!frame || !window.fetch) return;
      fetch(img.currentSrc || img.src, { cache: "force-cache" }).then(function (r) {
        var at = parseFloat(r.headers.get("X-Highlight-Top") || "");
        if (!(at > 0)) return;
        var y = at * img.clientHeight - frame.clientHeight / 3;
        frame.scrollTop = Math.max(0, y);
        img.dataset.scrolledTo = String(Math.round(frame.scrollTop));
      }).catch(function () { /* the image stays at its top */ });
    }
    if (img.complete && img.naturalWidth) go(); else img.addEventListener("load", go);
  });

  // the library's change under way (issue 50): follow its job, then show the library it made
  document.querySelectorAll("section.job[data-job]").forEach(function (box) {
    var id = box.dataset.job;
    if (box.dataset.phase === "done" || box.dataset.phase === "failed") return;
    function set(sel, text) { var el = box.querySelector(sel); if (el) el.textContent = text; }
    function poll() {
      fetch("/documents/jobs/" + encodeURIComponent(id), { headers: { Accept: "application/json" } })
        .then(function (r) { return r.json(); })
        .then(function (j) {
          box.dataset.phase = j.phase;
          box.querySelector("progress").value = j.percent;
          set(".job-phase", j.phase); set(".job-percent", j.percent); set(".job-message", j.message || "");
          if (j.error) { var e = box.querySelector(".job-error"); e.textContent = j.error; e.hidden = false; }
          if (j.finished) location.replace("/library?job=" + encodeURIComponent(id));
          else setTimeout(poll, 700);
        })
        .catch(function () { setTimeout(poll, 2000); });
    }
    setTimeout(poll, 500);
  });
})();
