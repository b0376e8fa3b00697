// Live mode of the execution page: appends the events the server pushes over the websocket.
// Without JavaScript the page is complete as served; reloading shows new events.
(function () {
  "use strict";
  var box = document.getElementById("live");
  var toggle = document.getElementById("live-toggle");
  var state = document.getElementById("live-state");
  var news = document.getElementById("live-news");
  var rows = document.getElementById("event-rows");
  if (!box || !toggle || !state || !rows) return;

  var atTail = box.dataset.tail === "true";
  var url = new URL(box.dataset.url, window.location.href);
  var socket = null;
  var runClosed = false;
  var retryDelay = 1000;
  var unseen = 0;

  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";

  function show(text) { state.textContent = text; state.dataset.state = text; }

  function appendRows(html) {
    var template = document.createElement("template");
    template.innerHTML = html.join("");
    rows.appendChild(template.content);
  }

  function replaceTimeline(html) {
    var current = document.getElementById("timeline");
    if (!current || !html) return;
    var template = document.createElement("template");
    template.innerHTML = html.trim();
    current.replaceWith(template.content);
  }

  function setStatus(status) {
    var badge = document.getElementById("run-status");
    if (!badge) return;
    badge.textContent = status;
    badge.className = "badge status-" + status;
  }

  function onEvents(message) {
    if (atTail) {
      appendRows(message.rows);
    } else {
      unseen += message.rows.length;
      news.hidden = false;
      news.textContent = unseen + " new event" + (unseen === 1 ? "" : "s") + " after this page";
    }
    url.searchParams.set("after", String(message.last_event_id));
    setStatus(message.status);
    replaceTimeline(message.timeline);
  }

  function finish() {
    runClosed = true;
    toggle.checked = false;
    toggle.disabled = true;
    show("closed");
  }

  function connect() {
    if (socket || runClosed || !toggle.checked) return;
    show("connecting");
    socket = new WebSocket(url.toString());
    socket.onopen = function () {
      retryDelay = 1000;
      show("connected");
      if (!unseen) news.hidden = true;
    };
    socket.onmessage = function (event) {
      var message = JSON.parse(event.data);
      if (message.type === "events") onEvents(message);
      if (message.type === "closed") { setStatus(message.status); finish(); }
    };
    socket.onclose = function (event) {
      socket = null;
      if (runClosed) return;
      if (event.code === 1000 || event.code === 4403 || !toggle.checked) { show("closed"); return; }
      // Dropped (a restart, the network): say so, then try again, waiting longer each time.
      show("closed");
      news.hidden = false;
      news.textContent = "connection lost; retrying in " + retryDelay / 1000 + " s";
      window.setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 30000);
    };
  }

  toggle.addEventListener("change", function () {
    if (toggle.checked) { connect(); return; }
    if (socket) socket.close(1000);
    show("off");
  });

  if (toggle.checked) connect();
})();
