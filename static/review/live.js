/* Ratchet dashboard behaviour that htmx attributes cannot express under the strict CSP
   (no eval, no inline scripts): DESIGN.md section 6.8.
   - Polling pauses while the tab is hidden and catches up at once when it is shown again.
   - A polled swap never replaces a form the user is filling in (it is retried next poll).
   - Forms (or the submit button pressed) with data-confirm ask before they submit (cancel,
     deny, batch deny, abort); data-confirm-when="field=value" asks only when that field has it.
   - Buttons with data-copy copy a long id to the clipboard. */
(function () {
  "use strict";

  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail && evt.detail.elt;
    if (elt && elt.hasAttribute && elt.hasAttribute("data-poll") && document.visibilityState !== "visible") {
      evt.preventDefault();
    }
  });

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") {
      document.querySelectorAll("[data-poll]").forEach(function (elt) {
        if (window.htmx) { window.htmx.trigger(elt, "ratchet:visible"); }
      });
    }
  });

  function busyWith(region) {
    /* Approvals ticked for a batch decision are a selection in progress too. */
    if (region && region.querySelector("input[data-batch-item]:checked")) { return true; }
    var active = document.activeElement;
    if (!active || !region || !region.contains(active)) { return false; }
    if (active.matches("input[type=text], input[type=password], textarea, select")) { return true; }
    return !!(active.form && active.form.querySelector("textarea, input[type=password]") &&
              Array.prototype.some.call(active.form.querySelectorAll("textarea, input[type=password]"),
                                        function (f) { return f.value !== ""; }));
  }

  document.addEventListener("htmx:oobBeforeSwap", function (evt) {
    var target = evt.detail && evt.detail.target;
    if (target && target.hasAttribute("data-keep-while-editing") && busyWith(target)) {
      evt.detail.shouldSwap = false;
      document.body.setAttribute("data-stale", "1");
    }
  });

  /* A region kept stale above is refreshed by the next poll: ask for everything again. */
  document.addEventListener("htmx:configRequest", function (evt) {
    var elt = evt.detail && evt.detail.elt;
    if (elt && elt.hasAttribute("data-poll") && document.body.hasAttribute("data-stale")) {
      document.body.removeAttribute("data-stale");
      evt.detail.parameters.since = "";
    }
  });

  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    var button = evt.submitter;
    var asker = button && button.hasAttribute && button.hasAttribute("data-confirm") ? button : form;
    var question = asker && asker.getAttribute && asker.getAttribute("data-confirm");
    var when = asker && asker.getAttribute && asker.getAttribute("data-confirm-when");
    if (question && when) {
      var parts = when.split("=");
      var field = form.elements[parts[0]];
      if (!field || field.value !== parts[1]) { question = null; }
    }
    if (question && !window.confirm(question)) { evt.preventDefault(); }
  }, true);

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest ? evt.target.closest("button[data-copy]") : null;
    if (!button) { return; }
    var text = button.getAttribute("data-copy");
    var done = function () {
      var old = button.textContent;
      button.textContent = "Copied";
      window.setTimeout(function () { button.textContent = old; }, 1500);
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, function () {});
    }
  });
})();
