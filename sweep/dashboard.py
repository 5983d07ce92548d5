"""A ``/sweep`` page on the Dask dashboard: every point of the running sweeps, live.

:class:`SweepPage` is a ``distributed.SchedulerPlugin``. Registered by the client (see
:meth:`sweep.Sweep.run`), it adds two routes to the scheduler's own HTTP server, next to
``/status``: ``/sweep`` (an HTML page that polls) and ``/sweep/data.json``. It learns about
sweeps through Dask's structured events (``log_event`` on topics ``sweep-<name>``): the client
announces the points, workers announce each start, each :func:`sweep.report` and each end.
For a sweep over a two-axis grid the page also draws a heatmap of each point's latest
reported objective (its first reported value).
"""

from __future__ import annotations

import json
import time
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin
from tornado.web import RequestHandler

NAME = "sweep-dashboard"
TOPIC_PREFIX = "sweep-"
KEEP_SWEEPS = 20
# Keys of a report event that are not the job's values (``worker`` is added by Dask).
NOT_VALUES = ("event", "index", "time", "attempt", "worker")


class SweepPage(SchedulerPlugin):
    """Collects sweep events on the scheduler and serves them at ``/sweep``."""

    name = NAME
    idempotent = True

    def __init__(self) -> None:
        self.sweeps: dict[str, dict[str, Any]] = {}

    async def start(self, scheduler: Any) -> None:
        app = getattr(scheduler, "http_application", None)
        if app is not None:
            app.add_handlers(
                r".*",
                [(r"/sweep/data.json", _Data, {"page": self}), (r"/sweep/?", _Page, {"page": self})],
            )

    def log_event(self, topic: str, msg: Any) -> None:
        if not topic.startswith(TOPIC_PREFIX) or not isinstance(msg, dict):
            return
        name = topic[len(TOPIC_PREFIX) :]
        event = msg.get("event")
        if event == "sweep":
            self.sweeps[name] = {**msg, "name": name, "points": {}, "since": time.time()}
            for old in sorted(self.sweeps, key=lambda n: self.sweeps[n]["since"])[:-KEEP_SWEEPS]:
                del self.sweeps[old]
            for p in msg.get("points", []):
                self.sweeps[name]["points"][_key(p["index"])] = {**p, "status": p.get("status", "queued")}
            return
        sweep = self.sweeps.get(name)
        if sweep is None or "index" not in msg:
            return
        point = sweep["points"].setdefault(_key(msg["index"]), {"index": msg["index"], "params": {}})
        if event == "start":
            point.update(status="running", host=msg.get("host", ""))
        elif event == "report":
            values = {k: v for k, v in msg.items() if k not in NOT_VALUES}
            point["latest"] = values
            point["reports"] = point.get("reports", 0) + 1
        elif event == "end":
            point.update({k: v for k, v in msg.items() if k not in ("event", "index")})

    def snapshot(self) -> dict[str, Any]:
        out = []
        for sweep in sorted(self.sweeps.values(), key=lambda s: -s["since"]):
            out.append(
                {k: v for k, v in sweep.items() if k != "points"} | {"points": list(sweep["points"].values())}
            )
        return {"sweeps": out, "time": time.time()}


def _key(index: Any) -> str:
    return ",".join(map(str, index))


class _Data(RequestHandler):
    def initialize(self, page: SweepPage) -> None:
        self.page = page

    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.write(json.dumps(self.page.snapshot(), default=str))


class _Page(RequestHandler):
    def initialize(self, page: SweepPage) -> None:
        self.page = page

    def get(self) -> None:
        self.set_header("Content-Type", "text/html")
        self.write(HTML)


HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>sweep</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h2 { margin: 1.2em 0 0.3em; } .meta { color: #666; font-size: 90%; }
table { border-collapse: collapse; font-size: 13px; margin-top: .5em; }
td, th { border: 1px solid #ddd; padding: 3px 7px; text-align: right; }
th { background: #f4f4f4; }
.done { background: #d9f2d9; } .running { background: #fff2b3; } .queued { background: #f7f7f7; }
.failed, .timeout, .killed { background: #f8cccc; }
.heat td { width: 46px; height: 30px; color: #fff; text-shadow: 0 0 2px #000; }
.counts span { margin-right: 1em; }
</style></head>
<body>
<h1>sweep</h1><div id="sweeps">waiting for a sweep...</div>
<script>
const fmt = v => (typeof v === "number" ? (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0)
  ? v.toExponential(3) : +v.toFixed(4)) : (v ?? ""));
function color(t) {  // dark blue -> green -> yellow
  const stops = [[68,1,84],[59,82,139],[33,145,140],[94,201,98],[253,231,37]];
  const x = Math.min(0.999, Math.max(0, t)) * (stops.length - 1), i = Math.floor(x), f = x - i;
  const c = stops[i].map((a, k) => Math.round(a + f * (stops[i + 1][k] - a)));
  return `rgb(${c.join(",")})`;
}
function objective(p) {
  if (!p.latest) return undefined;
  const keys = Object.keys(p.latest).filter(k => k !== "step");
  return keys.length ? p.latest[keys[0]] : undefined;
}
function heatmap(s) {
  if (!s.dims || s.dims.length !== 2 || s.kind !== "grid") return "";
  const [a, b] = s.dims, grid = {};
  let lo = Infinity, hi = -Infinity;
  for (const p of s.points) {
    const v = objective(p); grid[p.index.join(",")] = v;
    if (typeof v === "number") { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  }
  let h = `<table class="heat"><tr><th>${a} \\\\ ${b}</th>` +
    s.coords[b].map(v => `<th>${fmt(v)}</th>`).join("") + "</tr>";
  s.coords[a].forEach((va, i) => {
    h += `<tr><th>${fmt(va)}</th>`;
    s.coords[b].forEach((_, j) => {
      const v = grid[i + "," + j];
      const bg = typeof v === "number" ? color(hi > lo ? (v - lo) / (hi - lo) : 0.5) : "#eee";
      h += `<td style="background:${bg}">${fmt(v)}</td>`;
    });
    h += "</tr>";
  });
  return `<p class="meta">latest objective by ${a} x ${b}</p>` + h + "</table>";
}
function render(data) {
  if (!data.sweeps.length) return;
  let html = "";
  for (const s of data.sweeps) {
    const counts = {};
    for (const p of s.points) counts[p.status] = (counts[p.status] || 0) + 1;
    const names = s.points.length ? Object.keys(s.points[0].params || {}) : [];
    const latestKeys = [...new Set(s.points.flatMap(p => Object.keys(p.latest || {})))];
    html += `<h2>${s.name}</h2><div class="meta">${s.total} points, job ${s.job}</div>` +
      `<div class="counts">` +
      Object.entries(counts).map(([k, v]) => `<span class="${k}">${k} ${v}</span>`).join("") +
      `</div>` + heatmap(s);
    html += "<table><tr>" + names.map(n => `<th>${n}</th>`).join("") +
      "<th>status</th><th>host</th><th>cores</th><th>peak threads</th><th>wall s</th>" +
      latestKeys.map(k => `<th>${k}</th>`).join("") + "</tr>";
    for (const p of s.points) {
      html += `<tr class="${p.status}">` + names.map(n => `<td>${fmt(p.params[n])}</td>`).join("") +
        `<td>${p.status}</td><td>${p.host || ""}</td><td>${(p.cores || []).join(",")}</td>` +
        `<td>${p.peak_threads ?? ""}</td><td>${fmt(p.wall_s)}</td>` +
        latestKeys.map(k => `<td>${fmt((p.latest || {})[k])}</td>`).join("") + "</tr>";
    }
    html += "</table>";
  }
  document.getElementById("sweeps").innerHTML = html;
}
async function poll() {
  const url = location.pathname.replace(/\\/?$/, "/") + "data.json";
  try { render(await (await fetch(url)).json()); }
  catch (e) { console.log(e); }
  setTimeout(poll, 1000);
}
poll();
</script></body></html>
"""
