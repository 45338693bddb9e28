// gmgate console: polls the admin API and draws what it says. Plain
// JavaScript, no libraries; every value goes in as text, never as HTML.
"use strict";

const REFRESH_MS = 5000;
const SVG = "http://www.w3.org/2000/svg";

function token() { return sessionStorage.getItem("gmgate-token") || ""; }

async function api(path) {
  const headers = {};
  if (token()) headers["Authorization"] = "Bearer " + token();
  const r = await fetch("/api/v1/" + path, { headers, cache: "no-store" });
  if (r.status === 401) {
    document.getElementById("auth").style.display = "block";
    throw new Error("unauthorized");
  }
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function table(head, rows, numeric) {
  const t = el("table", {}, el("thead", {}, el("tr", {}, ...head.map(h => el("th", {}, h)))));
  const body = el("tbody");
  for (const r of rows) {
    body.append(el("tr", {}, ...r.map((c, i) => el("td", numeric && numeric.includes(i) ? { class: "num" } : {}, c))));
  }
  t.append(body);
  return t;
}

function replace(id, node) {
  const box = document.getElementById(id);
  box.className = "";
  box.replaceChildren(node);
}

function pct(x) { return (100 * x).toFixed(1) + "%"; }

function shareBar(share) {
  const bar = el("span", { class: "bar", title: pct(share) + " GM" });
  bar.append(el("i", { style: "width:" + (100 * share).toFixed(1) + "%" }));
  return bar;
}

function drawMigration(m) {
  const rows = [];
  for (const s of m.sites) {
    const w = {};
    for (const x of s.windows) w[x.minutes] = x;
    const h = w[60] || s.windows[s.windows.length - 1];
    const suites = el("div", { class: "suites muted" });
    for (const b of h.by_suite || []) suites.append(el("div", {}, b.protocol + (b.suite ? " " + b.suite : "") + ": " + b.connections));
    if (!suites.childNodes.length) suites.append("no traffic");
    const share = m => el("span", { class: "gm-share", "data-site": s.site, "data-minutes": String(m) }, pct((w[m] || h).gm_share));
    rows.push([
      el("b", {}, s.site), share(1), share(15), share(60), shareBar(h.gm_share),
      String(h.connections), String(h.requests), String(h.tls_clients_offered_gm), suites,
    ]);
  }
  const note = el("p", { class: "legend" }, "GM share: the part of the connections that used TLCP or TLS 1.3 ShangMi over the last 1, 15 and 60 minutes. Connections, requests and TLS clients that offered GM suites: last 60 minutes.");
  const box = el("div", {}, table(["site", "GM 1 min", "15 min", "60 min", "", "conns", "reqs", "TLS offered GM", "by protocol and suite"], rows, [1, 2, 3, 5, 6, 7]), note);
  replace("migration-body", box);
}

function when(t) { return t ? t.replace("T", " ").slice(0, 16) : "–"; }

function drawCertificates(c) {
  const rows = c.certificates.map(x => {
    const cls = x.days_left < 0 ? "days-expired" : x.days_left < 30 ? "days-soon" : "days-ok";
    const ocsp = x.ocsp_staple ? "OCSP " + x.ocsp_staple.state + (x.ocsp_staple.next_update ? " until " + when(x.ocsp_staple.next_update) : "") : "not checked";
    return [x.source, x.role, x.subject, x.sans.join(", "), x.key_type + " (" + x.key_backend + ")",
      x.not_after.slice(0, 10), el("span", { class: "days-left " + cls, "data-source": x.source, "data-role": x.role }, x.days_left + " days left"),
      el("span", { class: "revocation rev-" + x.revocation, "data-source": x.source, "data-role": x.role }, ocsp)];
  });
  replace("certificates-body", table(["source", "role", "subject", "names", "key", "not after", "expiry", "revocation"], rows));
  drawRevocationChecks(c.revocation_checks || []);
}

// drawRevocationChecks lists the CRL sources and OCSP responders that
// check client certificates (per site) and upstream certificates.
function drawRevocationChecks(checks) {
  if (!checks.length) { replace("revocation-body", el("span", { class: "muted" }, "no revocation checking configured")); return; }
  const rows = [];
  for (const s of checks) {
    for (const src of s.sources) {
      const crl = src.kind === "crl" ? (src.revoked !== undefined ? src.revoked + " revoked, next update " + when(src.next_update) : "no CRL loaded") : "";
      rows.push([s.scope, s.checks + " · " + s.policy, src.kind.toUpperCase(), src.source,
        el("span", { class: "source-state rev-" + src.state, "data-scope": s.scope, "data-source": src.source }, src.state),
        crl, when(src.last_fetch), el("span", { class: "muted" }, src.last_error || "")]);
    }
  }
  replace("revocation-body", table(["scope", "checks · policy", "kind", "source", "state", "CRL", "last fetch (UTC)", "last error"], rows));
}

function drawUpstreams(u) {
  const rows = [];
  for (const up of u.upstreams) {
    for (const t of up.targets) {
      const lat = up.latency && up.latency.p50_ms !== null && up.latency.p50_ms !== undefined
        ? up.latency.p50_ms + " / " + up.latency.p90_ms + " / " + up.latency.p99_ms + " ms" : "–";
      rows.push([up.name, t.url, el("span", { class: "target-state state-" + t.state, "data-target": t.url }, t.state),
        String(t.in_flight), lat, el("span", { class: "muted" }, t.last_error || "")]);
    }
  }
  replace("upstreams-body", table(["upstream", "target", "state", "in flight", "p50/p90/p99", "last error"], rows, [3]));
}

function drawAccel(a) {
  if (!a.backends.length) { replace("accel-body", el("span", { class: "muted" }, "no key operation yet")); return; }
  const rows = a.backends.map(b => {
    const ops = Object.entries(b.ops).map(([op, r]) => op + ": " + Object.entries(r).map(([k, v]) => k + " " + v).join(", ")).join("; ");
    const errs = Object.entries(b.errors).map(([k, v]) => k + " " + v).join(", ") || "none";
    return [b.backend, ops, errs, String(b.pool_in_use), b.ops_per_second.toFixed(1)];
  });
  replace("accel-body", table(["backend", "operations", "errors", "pool in use", "ops/s"], rows, [3, 4]));
}

function drawFailures(f) {
  if (!f.failures.length) { replace("failures-body", el("span", { class: "muted" }, "none kept (" + f.total + " in all)")); return; }
  const rows = f.failures.slice(0, 20).map(x => [x.time.slice(11, 19), x.listener, x.client, x.protocol, x.sni || "", x.result, x.cause]);
  replace("failures-body", el("div", {}, table(["time (UTC)", "listener", "client", "protocol", "server name", "result", "cause"], rows),
    el("p", { class: "legend" }, f.total + " failed handshakes since start; the last " + f.kept + " are kept.")));
}

function drawConfig(c) {
  document.getElementById("generation").textContent = "generation " + c.generation + " · loaded " + c.loaded_at.replace("T", " ").slice(0, 19) + " UTC";
  const rows = c.reloads.slice(-10).reverse().map(r => [r.time.replace("T", " ").slice(0, 19), r.result, String(r.generation), (r.problems || []).join("; ")]);
  replace("reloads-body", el("div", {}, el("p", {}, "file: " + (c.file || "(built in)")),
    rows.length ? table(["time (UTC)", "result", "generation", "problems"], rows) : el("p", { class: "muted" }, "no reload yet")));
}

// lineChart draws points (numbers) as an SVG polyline with its maximum.
function lineChart(values, width, height) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", width); svg.setAttribute("height", height);
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  const frame = document.createElementNS(SVG, "rect");
  frame.setAttribute("x", 0.5); frame.setAttribute("y", 0.5); frame.setAttribute("width", width - 1); frame.setAttribute("height", height - 1);
  frame.setAttribute("fill", "none"); frame.setAttribute("stroke", "#d9dee3");
  svg.append(frame);
  const max = Math.max(1, ...values);
  if (values.length === 1) {
    const dot = document.createElementNS(SVG, "circle");
    dot.setAttribute("cx", width / 2); dot.setAttribute("cy", (height - 4 - values[0] / max * (height - 18)).toFixed(1)); dot.setAttribute("r", 3); dot.setAttribute("fill", "#b3261e");
    svg.append(dot);
  }
  if (values.length > 1) {
    const pts = values.map((v, i) => (4 + i * (width - 8) / (values.length - 1)).toFixed(1) + "," + (height - 4 - v / max * (height - 18)).toFixed(1));
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", pts.join(" ")); line.setAttribute("fill", "none"); line.setAttribute("stroke", "#b3261e"); line.setAttribute("stroke-width", 2);
    svg.append(line);
  }
  const label = document.createElementNS(SVG, "text");
  label.setAttribute("x", 6); label.setAttribute("y", 13); label.setAttribute("font-size", 11); label.setAttribute("fill", "#5b6570");
  label.textContent = "max " + max.toFixed(1);
  svg.append(label);
  return svg;
}

function drawCost(c) {
  const perCPU = c.points.map(p => p.handshakes_per_cpu_second);
  replace("cost-chart", lineChart(perCPU, 520, 110));
  const last = c.points[c.points.length - 1];
  const t = c.since_start;
  document.getElementById("cost-text").textContent = (last
    ? "last " + c.interval_seconds + " s: " + last.handshakes_per_second.toFixed(1) + " handshakes/s, " + last.cpu_seconds_per_second.toFixed(2) + " CPU, " + last.handshakes_per_cpu_second.toFixed(0) + " per CPU-second. "
    : "") + "Since start: " + t.handshakes + " handshakes, " + t.cpu_seconds.toFixed(1) + " CPU-seconds.";
}

async function refresh() {
  const parts = [["config", drawConfig], ["migration", drawMigration], ["certificates", drawCertificates],
    ["upstreams", drawUpstreams], ["accel", drawAccel], ["handshakes/failures", drawFailures], ["cost", drawCost]];
  let ok = true;
  await Promise.all(parts.map(async ([path, draw]) => {
    try { draw(await api(path)); } catch (e) { ok = false; console.warn(e); }
  }));
  document.getElementById("updated").textContent = ok ? "updated " + new Date().toLocaleTimeString() : "some views failed to load";
  document.body.dataset.loaded = "1";
}

document.getElementById("token-save").addEventListener("click", () => {
  sessionStorage.setItem("gmgate-token", document.getElementById("token").value);
  document.getElementById("auth").style.display = "none";
  refresh();
});
refresh();
setInterval(refresh, REFRESH_MS);
