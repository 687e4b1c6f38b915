// loops dashboard: live updates (issue 29). The pages read well without
// this script; with it, a page marked data-live swaps in its regions
// (elements with an id and data-region) when the store changes, and a
// running run's output (pre#output[data-follow]) grows as it is written.
(function () {
  "use strict";

  // Swaps in the page's regions as the server renders them now.
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var next = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-region][id]").forEach(function (old) {
          var fresh = next.getElementById(old.id);
          if (fresh) { old.replaceWith(document.importNode(fresh, true)); }
        });
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  function live() {
    if (!document.body.hasAttribute("data-live") || !window.EventSource) { return; }
    var events = new EventSource("/api/v1/events");
    events.addEventListener("ready", function () { document.body.classList.add("connected"); });
    events.addEventListener("change", refresh);
    // Nothing changed, but "3m ago" has become "4m ago".
    events.addEventListener("tick", refresh);
    events.addEventListener("error", function () { document.body.classList.remove("connected"); });
  }

  function follow() {
    var out = document.getElementById("output");
    if (!out || !out.dataset.follow || !window.EventSource) { return; }
    var stream = new EventSource(out.dataset.follow);
    var fresh = true;
    stream.addEventListener("ready", function () { document.body.classList.add("connected"); });
    // The stream starts at the start of the log: it replaces what the
    // server rendered.
    stream.addEventListener("output", function (e) {
      var atBottom = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
      if (fresh) { out.textContent = ""; fresh = false; }
      out.textContent += e.data + "\n";
      if (atBottom) { out.scrollTop = out.scrollHeight; }
    });
    stream.addEventListener("end", function () {
      stream.close();
      // The run's final status, exit and duration.
      location.reload();
    });
    stream.addEventListener("error", function () { document.body.classList.remove("connected"); });
  }

  document.addEventListener("DOMContentLoaded", function () { live(); follow(); });
})();
