// The operator's console: one snapshot of the stack per server-sent event,
// drawn into the tables. Every value is set as text, never as markup: an
// account's last error is whatever its upstream printed.
"use strict";

const $ = (id) => document.getElementById(id);

// When each snapshot was drawn (milliseconds since the page's time origin),
// so a test or a benchmark can tell how long an update took to show.
const drawn = { first: null, count: 0 };
window.consoleDrawn = drawn;

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text === undefined || text === null || text === "" ? "-" : String(text);
  if (cls) td.className = cls;
  return td;
}

function fill(tableId, rows, empty, render) {
  const body = $(tableId).tBodies[0];
  const out = [];
  for (const row of rows || []) {
    const tr = document.createElement("tr");
    for (const td of render(row)) tr.appendChild(td);
    out.push(tr);
  }
  if (out.length === 0) {
    const tr = document.createElement("tr");
    const td = cell(empty, "empty");
    td.colSpan = $(tableId).tHead.rows[0].cells.length;
    tr.appendChild(td);
    out.push(tr);
  }
  body.replaceChildren(...out);
}

function when(ms) {
  if (!ms) return "-";
  return new Date(ms).toLocaleTimeString();
}

function draw(s) {
  $("problems").textContent = (s.problems || []).join("\n");
  fill("services", s.services, "no services", (v) => [
    cell(v.name),
    cell(v.state.replace("_", " "), "state-" + v.state),
  ]);
  drawFleet(s.fleet);
  fill("accounts", s.accounts, "no connected accounts", (a) => [
    cell(a.name, "mono"),
    cell(a.state, "state-" + a.state),
    cell(a.tools),
    cell(a.restarts),
    cell(a.lastError, "error"),
  ]);
  fill("hires", s.hires, "no open hires", (h) => [
    cell(h.hireId, "mono"),
    cell(h.role),
    cell(h.projectId),
    cell(h.lead, "mono"),
    cell(h.readiness + (h.readinessReason ? " (" + h.readinessReason + ")" : "")),
    cell(
      (h.bridge.present ? "present" : "absent") + ", " + h.bridge.freshness,
      "bridge-" + h.bridge.freshness,
    ),
  ]);
  const calls = s.calls || {};
  fill("calls", calls.recent, "no calls yet", (c) => [
    cell(when(c.dispatchedAtMs)),
    cell(c.name, "mono"),
    cell(c.outcome, "outcome-" + c.outcome),
    cell(c.receiptId, "mono receipt"),
    cell(c.detail, "error"),
  ]);
  fill("uncertain", calls.uncertain, "none", (c) => [
    cell(when(c.dispatchedAtMs)),
    cell(c.name, "mono"),
    cell(c.receiptId, "mono receipt"),
    cell(c.settled ? "settled uncertain" : "no answer yet", "outcome-uncertain"),
    cell(c.detail, "error"),
  ]);
  const auto = s.auto;
  $("auto-switch").textContent = auto ? (auto.on ? "on" : "off") : "?";
  $("auto-next").textContent = auto && auto.nextRoundMs ? when(auto.nextRoundMs) : "-";
  fill("auto", auto ? auto.projects : [], "no projects", (p) => [
    cell(p.name || p.projectId),
    cell(p.auto ? "on" : "off", p.auto ? "state-serving" : ""),
    cell(p.focus),
    cell(p.agentsWorking),
    cell(p.needsYou),
    cell(p.leadConversationId, "mono"),
    // Rounds run for every project on Auto at once, while the switch is on.
    cell(auto.on && p.auto && auto.nextRoundMs ? when(auto.nextRoundMs) : "-"),
  ]);
  $("updated").textContent = "updated " + new Date(s.atMs).toLocaleTimeString();
  drawn.count += 1;
  const now = performance.now();
  if (drawn.first === null) drawn.first = now;
  drawn.last = now;
  document.documentElement.dataset.drawn = String(drawn.count);
}

function drawFleet(f) {
  const tools = $("toggle-tools");
  const peers = $("toggle-peers");
  if (!f) {
    $("fleet-tools").textContent = "?";
    $("peer-messages").textContent = "?";
    tools.disabled = peers.disabled = true;
    return;
  }
  $("fleet-tools").textContent = f.tools;
  $("fleet-tools").className = "state-" + f.tools;
  $("peer-messages").textContent = f.peerMessages ? "on" : "off";
  tools.textContent = f.tools === "off" ? "Turn fleet tools on" : "Turn fleet tools off";
  tools.dataset.next = f.tools === "off" ? "connected" : "off";
  peers.textContent = f.peerMessages ? "Turn peer messages off" : "Turn peer messages on";
  peers.dataset.next = f.peerMessages ? "off" : "on";
  tools.disabled = peers.disabled = false;
  $("fleet-note").textContent = f.unreadable
    ? "The fleet settings file cannot be read: every switch reads as its safe side."
    : "";
}

async function flip(body) {
  const resp = await fetch("/console/switch", {
    method: "POST",
    credentials: "same-origin",
    // The custom header is what a cross-site form cannot send.
    headers: { "content-type": "application/json", "x-clankie-console": "1" },
    body: JSON.stringify(body),
  });
  if (resp.status === 401) {
    location.assign("/console");
    return;
  }
  if (!resp.ok) {
    const text = await resp.text();
    $("problems").textContent = "the switch was not changed: " + text;
  }
}

function connect() {
  const live = $("live");
  const events = new EventSource("/console/events");
  events.addEventListener("snapshot", (e) => {
    live.textContent = "live";
    live.className = "live";
    draw(JSON.parse(e.data));
  });
  events.addEventListener("signed-out", () => {
    events.close();
    location.assign("/console");
  });
  events.onerror = () => {
    live.textContent = "reconnecting";
    live.className = "stale";
  };
}

document.addEventListener("DOMContentLoaded", () => {
  $("toggle-tools").addEventListener("click", (e) => flip({ fleetTools: e.target.dataset.next }));
  $("toggle-peers").addEventListener("click", (e) =>
    flip({ peerMessages: e.target.dataset.next === "on" }),
  );
  connect();
});
