#include "admin/ui_page.hpp"

#include <array>
#include <random>

namespace floodgate::service {
namespace {

// The page. @NONCE@ marks where the response's nonce goes. Everything the server sends is
// written with textContent (never innerHTML): keys are callers' data.
constexpr std::string_view page = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>floodgate status</title>
<style nonce="@NONCE@">
body{font:14px/1.4 system-ui,sans-serif;margin:0;padding:10px;background:#f6f6f6;color:#222}
h1{font-size:18px;margin:0 0 4px}h2{font-size:15px;margin:0 0 6px}h3{font-size:13px;margin:8px 0 4px}
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 10px;margin:10px 0;overflow-x:auto}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:3px 6px;border-bottom:1px solid #eee}
th{font-weight:600}.num{text-align:right;white-space:nowrap}th.num{white-space:normal}
.ok{color:#176f2c;font-weight:600}.bad{color:#b00020;font-weight:600}.muted{color:#777}
.key{font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}
form{display:flex;flex-wrap:wrap;gap:6px;margin-bottom:6px}input,select,button{font:inherit;padding:4px}
input{flex:1;min-width:8em}
</style></head><body>
<h1>floodgate <span id="backend-health" class="muted">…</span></h1>
<div id="updated" class="muted">loading…</div>
<section><h2>Rules</h2><div id="rules-source" class="muted"></div><table id="rules"><thead><tr><th>rule</th><th class="num">checks/s</th>
<th class="num">denied, recent</th><th class="num">denied, total</th><th class="num">checks</th>
<th class="num">limit / window</th><th>algorithm</th></tr></thead><tbody></tbody></table></section>
<section><h2>Hot keys</h2><div id="top"></div></section>
<section><h2>Backend</h2><table id="backend"><tbody></tbody></table></section>
<section><h2>Clock skew (Redis minus this host)</h2><div id="clock"></div></section>
<section><h2>Inspect a key</h2><form id="inspect-form"><select id="inspect-rule"></select>
<input id="inspect-key" placeholder="key" maxlength="1024" autocomplete="off"><button>inspect</button>
</form><table id="inspect"><tbody></tbody></table></section>
<script nonce="@NONCE@">
"use strict";
const POLL_MS = 2000;
const DENIED = ["denied", "local_denied", "failed"];  // answered "no" (429 or 503)
let history = [], polls = 0;  // the last polls' statuses, oldest first
const $ = (id) => document.getElementById(id);
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function row(cells) {
  const tr = el("tr");
  for (const c of cells) tr.appendChild(c instanceof Node ? c : el("td", c));
  return tr;
}
function num(v, cls) { return el("td", v, "num" + (cls ? " " + cls : "")); }
// A hot key's count with its error bound (space-saving): exact when the error is 0, else the
// range [count - error, count], so a decoy that took a counter late does not look hotter than
// a key counted from the start.
function count(e) {
  if (!e) return num("");
  const td = num(e.error > 0 ? (e.count - e.error) + "–" + e.count : e.count, "count");
  td.dataset.count = e.count;
  td.dataset.error = e.error;
  td.title = e.error > 0 ? "at least " + (e.count - e.error) + ", at most " + e.count : "exact";
  return td;
}
function total(d) { let n = 0; for (const k in d) if (k !== "invalid") n += d[k]; return n; }
function denied(d) { let n = 0; for (const k of DENIED) n += d[k] || 0; return n; }
function pct(part, whole) { return whole > 0 ? (100 * part / whole).toFixed(1) + " %" : "–"; }
function fixed(v, digits) { return v === null || v === undefined ? "–" : v.toFixed(digits); }
function duration(ms) {
  for (const [unit, n] of [["h", 3600000], ["m", 60000], ["s", 1000]])
    if (ms % n === 0) return ms / n + unit;
  return ms + "ms";
}

function showRules(s) {
  const body = $("rules").tBodies[0];
  // Rates since the latest poll at least 1 s (of the server's clock) older; without one (the
  // first poll, or a browser running timers faster), the average since floodgated started.
  const base = history.filter((h) => s.now_ms - h.now_ms >= 1000).pop();
  const before = new Map();
  if (base) for (const r of base.rules) before.set(r.name, r);
  const seconds = base ? (s.now_ms - base.now_ms) / 1000 : s.uptime_s;
  const select = $("inspect-rule"), chosen = select.value;
  const rows = [], options = [];
  for (const r of s.rules) {
    const all = total(r.decisions), no = denied(r.decisions), p = before.get(r.name);
    const dAll = p ? all - total(p.decisions) : all, dNo = p ? no - denied(p.decisions) : no;
    const rate = seconds > 0 ? dAll / seconds : 0;
    // The columns a phone shows first come first.
    const tr = row([el("td", r.name + (r.shadow ? " (shadow)" : "")), num(rate.toFixed(1), "rate"),
                    num(pct(dNo, dAll), "ratio-recent"), num(pct(no, all), "ratio-total"),
                    num(all), num(r.limit + " / " + duration(r.window_ms)), el("td", r.algorithm)]);
    tr.dataset.rule = r.name;
    tr.dataset.rate = rate;
    tr.dataset.denialRatio = all > 0 ? no / all : 0;
    rows.push(tr);
    if (r.algorithm !== "concurrency") {
      const o = el("option", r.name);
      o.value = r.name;
      options.push(o);
    }
  }
  body.replaceChildren(...rows);
  select.replaceChildren(...options);
  if (chosen) select.value = chosen;
}

async function showTop(s) {
  const box = $("top");
  if (!s.top_keys.enabled) {
    box.replaceChildren(el("p", "Hot keys are off: start floodgated with --top-keys N.", "muted"));
    return;
  }
  const parts = [];
  for (const r of s.rules.slice(0, 32)) {
    if (r.algorithm === "concurrency") continue;
    const res = await fetch("/v1/top?n=5&rule=" + encodeURIComponent(r.name), {cache: "no-store"});
    if (!res.ok) continue;
    const t = await res.json();
    parts.push(el("h3", r.name + ": " + t.checks + " checks, " + t.denials + " denied in the last " +
                        Math.round(t.span_ms / 1000) + " s"));
    const table = el("table");
    table.className = "top";
    table.dataset.rule = r.name;
    table.appendChild(row([el("th", "most denied"), el("th", "count", "num"),
                           el("th", "most checked"), el("th", "count", "num")]));
    for (let i = 0; i < Math.max(t.denied.length, t.checked.length); ++i) {
      const d = t.denied[i], c = t.checked[i];
      table.appendChild(row([el("td", d ? d.key : "", "key denied-key"), count(d),
                             el("td", c ? c.key : "", "key checked-key"), count(c)]));
    }
    if (!t.checked.length) table.appendChild(row([el("td", "no checks yet", "muted")]));
    parts.push(table);
    if (t.checked.some(e => e.error > 0) || t.denied.some(e => e.error > 0))
      parts.push(el("p", "a–b: seen at least a and at most b times (a key that took over " +
                         "another's counter starts from that count)", "muted range-note"));
  }
  box.replaceChildren(...parts);
}

function showBackend(s) {
  const b = s.backend;
  const health = $("backend-health");
  health.textContent = b.kind + ": " + (b.healthy ? "healthy" : "not ready");
  health.className = b.healthy ? "ok" : "bad";
  const kinds = [];
  for (const k in b.errors) if (b.errors[k] > 0) kinds.push(k + " " + b.errors[k]);
  const line = (name, v, cls) => row([el("th", name), el("td", v, cls)]);
  $("backend").tBodies[0].replaceChildren(
      line("backend", b.kind),
      line("health", b.healthy ? "healthy" : "not ready", b.healthy ? "ok" : "bad"),
      line("last error", b.last_error || "none", b.last_error ? "bad" : ""),
      line("calls", b.calls),
      line("latency, mean", fixed(b.latency_mean_ms, 2) + " ms"),
      line("latency, p99 (estimate)", fixed(b.latency_p99_ms, 2) + " ms"),
      line("errors", kinds.length ? kinds.join(", ") : "none", kinds.length ? "bad" : ""));
}

function showClock(s) {
  const box = $("clock");
  if (!s.clock.length) {
    box.replaceChildren(el("p", "not sampled (Redis's clock is sampled for redis:// and " +
                                "redis+cluster:// backends)", "muted"));
    return;
  }
  const t = el("table");
  t.appendChild(row([el("th", "node"), el("th", "offset ms", "num"), el("th", "± ms", "num"),
                     el("th", "")]));
  for (const c of s.clock)
    t.appendChild(row([el("td", c.node), num(fixed(c.offset_ms, 2)),
                       num(c.rtt_ms === null ? "–" : (c.rtt_ms / 2).toFixed(2)),
                       el("td", c.up ? "up" : "down", c.up ? "ok" : "bad")]));
  box.replaceChildren(t);
}

// Where the rules come from; for --rules-from, the version in force and why a newer one is not.
function showRulesSource(s) {
  const r = s.rules_source, d = $("rules-source");
  if (!r || r.from !== "redis") { d.textContent = ""; return; }
  let text = "version " + r.version + " from " + r.where;
  if (r.latest > r.version) text += "; version " + r.latest + " refused: " + r.refused;
  if (r.redis_error) text += "; Redis unreadable, last good rules in force: " + r.redis_error;
  if (r.runtime_overrides)
    text += "; " + r.runtime_overrides + " run-time override" +
            (r.runtime_overrides === 1 ? "" : "s") + " live";
  d.textContent = text;
  d.className = r.latest > r.version || r.redis_error ? "bad" : "muted";
}

async function poll() {
  const u = $("updated");
  try {
    const res = await fetch("/v1/status", {cache: "no-store"});
    if (!res.ok) throw new Error("HTTP " + res.status);
    const s = await res.json();
    showRules(s);
    showRulesSource(s);
    showBackend(s);
    showClock(s);
    await showTop(s);
    history.push(s);
    if (history.length > 10) history.shift();
    ++polls;
    u.textContent = "updated " + new Date(s.now_ms).toISOString().slice(11, 19) + " UTC, up " +
                    Math.round(s.uptime_s) + " s";
    u.className = "muted";
    u.dataset.polls = polls;
  } catch (e) {
    u.textContent = "cannot reach floodgated: " + e.message;
    u.className = "bad";
  }
  setTimeout(poll, POLL_MS);
}

$("inspect-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const rule = $("inspect-rule").value, key = $("inspect-key").value;
  if (!rule || !key) return;
  const rows = [];
  const add = (k, v) => rows.push(row([el("th", k), el("td", v, "key")]));
  try {
    const res = await fetch("/v1/inspect?rule=" + encodeURIComponent(rule) + "&key=" +
                            encodeURIComponent(key), {cache: "no-store"});
    const j = await res.json();
    if (!res.ok) {
      add("error", j.error || "HTTP " + res.status);
    } else {
      for (const k of ["rule", "key", "remaining", "capacity", "reset_after_ms", "backend"])
        add(k, j[k]);
      if (j.raw) for (const k in j.raw) add("raw " + k, j.raw[k]);
      else add("raw", j.raw_note);
    }
  } catch (e) {
    add("error", e.message);
  }
  $("inspect").tBodies[0].replaceChildren(...rows);
});

poll();
</script></body></html>
)html";

}  // namespace

std::string ui_page(std::string_view nonce) {
  std::string out(page);
  constexpr std::string_view mark = "@NONCE@";
  for (auto at = out.find(mark); at != std::string::npos; at = out.find(mark, at))
    out.replace(at, mark.size(), nonce);
  return out;
}

http_response render_ui() {
  // 128 bits from the OS: a nonce an injected script cannot guess.
  thread_local std::random_device random;
  std::string nonce;
  constexpr char hex[] = "0123456789abcdef";
  for (int i = 0; i < 4; ++i)
    for (auto v = random(), j = 0u; j < 8; ++j, v >>= 4) nonce += hex[v & 15];
  http_response res;
  res.headers.emplace_back("Content-Type", "text/html; charset=utf-8");
  res.headers.emplace_back("Cache-Control", "no-store");
  res.headers.emplace_back(
      "Content-Security-Policy",
      "default-src 'none'; script-src 'nonce-" + nonce + "'; style-src 'nonce-" + nonce +
          "'; connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; "
          "frame-ancestors 'none'");
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  res.headers.emplace_back("Referrer-Policy", "no-referrer");
  res.body = ui_page(nonce);
  return res;
}

}  // namespace floodgate::service
