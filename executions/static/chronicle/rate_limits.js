// Live rates on the rate-limits page: two readings of each bucket's granted count, 2 s apart.
(function () {
  const table = document.getElementById("rate-table");
  if (!table) return;
  let last = null;
  async function refresh() {
    try {
      const answer = await fetch(table.dataset.countsUrl, { headers: { Accept: "application/json" } });
      if (!answer.ok) return;
      const data = await answer.json();
      const now = performance.now();
      for (const row of table.querySelectorAll("tr[data-bucket]")) {
        const counts = data.buckets[row.dataset.bucket] || { granted: 0, throttled: 0 };
        row.querySelector(".throttled").textContent = counts.throttled;
        if (last) {
          const before = last.buckets[row.dataset.bucket] || { granted: 0 };
          const perSecond = (counts.granted - before.granted) / ((now - last.at) / 1000);
          row.querySelector(".live-rate").textContent = Math.max(0, perSecond).toFixed(1) + "/s";
        }
      }
      last = { at: now, buckets: data.buckets };
    } catch (error) {
      // The next refresh tries again; the page keeps its last figures.
    }
  }
  refresh();
  setInterval(refresh, 2000);
})();
