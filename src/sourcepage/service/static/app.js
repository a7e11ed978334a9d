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
})();
