// Batch job page: poll the job's progress while it runs; reload once it ends to show its failures.
(function () {
  "use strict";
  var panel = document.getElementById("batch-progress-panel");
  if (!panel) return;
  var url = panel.dataset.progressUrl;
  function set(id, value) {
    var el = document.getElementById(id);
    if (el) el.textContent = String(value);
  }
  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (job) {
        ["done", "failed", "total", "rate", "rps", "state"].forEach(function (k) { set("batch-" + k, job[k]); });
        var bar = document.getElementById("batch-progress");
        if (bar) { bar.max = job.total || 1; bar.value = job.done + job.failed; }
        if (job.state !== "Running") { window.location.reload(); return; }
        window.setTimeout(poll, 1000);
      })
      .catch(function () { window.setTimeout(poll, 5000); });
  }
  window.setTimeout(poll, 1000);
})();
