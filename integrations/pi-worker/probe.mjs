// The release probe: does this installed Pi do what the worker extension
// relies on? Run with the selected Node:
//
//   node probe.mjs --pi PACKAGE_DIR
//
// In a throwaway profile, offline, against a local OpenAI-compatible
// endpoint it starts itself (or CLANKIE_PI_PROBE_ENDPOINT), it loads
// probe-extension.mjs through Pi's own extension loader, binds the real
// worker runtime to a TUI-mode session from the package's SDK, and drives
// one brief. Surfaces, in order: the session's identity, a dialog that
// must not block, the brief's delivery receipt, the follow-up turn and its
// settlement, the MCP tool-error override, and the session file's layout.
// It prints one JSON line; a failure names the release and the first
// surface that failed.

import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { PROBE_TOOL } from "./probe-extension.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const OLDEST = [0, 87, 1];
const STEP_MS = Number(process.env.CLANKIE_PI_PROBE_TIMEOUT_MS || 20_000);

function arg(name) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
}

function say(line) {
  process.stdout.write(JSON.stringify(line) + "\n");
}

function older(version) {
  const v = String(version).split(/[-+]/)[0].split(".").map(Number);
  if (v.length !== 3 || v.some((n) => !Number.isInteger(n))) return true;
  for (let i = 0; i < 3; i++) if (v[i] !== OLDEST[i]) return v[i] < OLDEST[i];
  return false;
}

/** The probe's model: the brief → one call of the probe tool → "done". */
function scriptedModel() {
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      let messages = [];
      try { messages = JSON.parse(body).messages ?? []; } catch { /* empty */ }
      const last = messages.at(-1) ?? {};
      const text = (m) => (typeof m.content === "string" ? m.content : (m.content ?? []).map((p) => p.text ?? "").join(""));
      const briefed = messages.some((m) => m.role === "user" && text(m).includes("<clankie-delivery"));
      const chunk = (delta, finish = null) =>
        `data: ${JSON.stringify({ id: "probe", object: "chat.completion.chunk", created: 0, model: "scripted", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.writeHead(200, { "content-type": "text/event-stream", connection: "close" });
      res.write(chunk({ role: "assistant", content: "" }));
      if (briefed && last.role !== "tool") {
        res.write(chunk({ tool_calls: [{ index: 0, id: "call_probe", type: "function", function: { name: PROBE_TOOL, arguments: "{}" } }] }));
        res.write(chunk({}, "tool_calls"));
      } else {
        res.write(chunk({ content: "done" }));
        res.write(chunk({}, "stop"));
      }
      res.end("data: [DONE]\n\n");
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** The seat the runtime reads: one brief, then nothing until closed. */
class ProbeSeat {
  constructor(mark) {
    this.mark = mark;
    this.given = false;
    this.delivery = {
      deliveryId: "dlv_probe",
      kind: "lead",
      from: "conversation:probe",
      text: "The probe's brief: call the probe tool, then say done.",
    };
  }
  async poll() {
    if (!this.given) {
      this.given = true;
      return { status: 200, body: { deliveries: [this.delivery], catalogRevision: "probe" } };
    }
    await new Promise((r) => (this.wake = r));
    return { status: 200, body: { deliveries: [] } };
  }
  async claim() {
    return { status: 200, body: { claimId: "claim_probe", deliveries: [this.delivery] } };
  }
  async ack(deliveryId) {
    this.mark("receipt", { deliveryId });
    return { status: 200, body: {} };
  }
  async release() {
    return { status: 200, body: {} };
  }
  close() {
    this.wake?.();
  }
}

async function main() {
  const pkgDir = arg("--pi");
  if (!pkgDir) {
    say({ ok: false, release: null, surface: "arguments", error: "usage: node probe.mjs --pi PACKAGE_DIR" });
    return 2;
  }
  let release = null;
  try {
    release = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")).version ?? null;
  } catch (e) {
    say({ ok: false, release, surface: "package", error: `no Pi package at ${pkgDir}: ${e.message}` });
    return 1;
  }
  if (older(release)) {
    say({ ok: false, release, surface: "release", error: `releases older than ${OLDEST.join(".")} are refused without probing` });
    return 1;
  }
  const started = Date.now();
  const root = mkdtempSync(join(tmpdir(), "clankie-pi-probe-"));
  const agentDir = join(root, "agent");
  const cwd = join(root, "work");
  for (const d of [agentDir, cwd, join(root, "home")]) mkdirSync(d, { recursive: true });
  Object.assign(process.env, {
    PI_CODING_AGENT_DIR: agentDir,
    HOME: join(root, "home"),
    PI_OFFLINE: "1",
    PI_TELEMETRY: "0",
  });
  const model = process.env.CLANKIE_PI_PROBE_ENDPOINT ? null : await scriptedModel();
  const baseUrl = process.env.CLANKIE_PI_PROBE_ENDPOINT || `http://127.0.0.1:${model.address().port}/v1`;
  writeFileSync(join(agentDir, "models.json"), JSON.stringify({
    providers: { probe: { baseUrl, api: "openai-completions", apiKey: "offline", models: [{ id: "scripted" }] } },
  }));

  const marks = new Map();
  const waiters = new Map();
  const mark = (name, data = {}) => {
    marks.set(name, data);
    waiters.get(name)?.(data);
  };
  const seat = new ProbeSeat(mark);
  globalThis.__clankieProbe = { connection: seat, mark, log: () => {} };
  const waitFor = (name) =>
    marks.has(name)
      ? Promise.resolve(marks.get(name))
      : new Promise((resolve, reject) => {
          const t = setTimeout(() => reject(new Error(`nothing within ${STEP_MS} ms`)), STEP_MS);
          waiters.set(name, (d) => { clearTimeout(t); resolve(d); });
        });

  let surface = "sdk";
  let session;
  try {
    const pi = await import(pathToFileURL(join(pkgDir, "dist/index.js")).href);
    const { createAgentSession, DefaultResourceLoader, SessionManager } = pi;
    const resourceLoader = new DefaultResourceLoader({
      cwd,
      agentDir,
      additionalExtensionPaths: [join(HERE, "probe-extension.mjs")],
      noSkills: true,
      noContextFiles: true,
    });
    await resourceLoader.reload();
    surface = "extension";
    ({ session } = await createAgentSession({ cwd, agentDir, resourceLoader, sessionManager: SessionManager.create(cwd) }));
    await session.bindExtensions({ mode: "tui", onError: (e) => mark("extensionError", { error: String(e?.error ?? e) }) });

    surface = "session";
    const s = await waitFor("session");
    if (!s.id || !s.file) throw new Error(`no session identity (id ${s.id}, file ${s.file})`);
    surface = "dialog";
    const d = await waitFor("dialog");
    if (d.ms > 1500) throw new Error(`a dialog held the session for ${d.ms} ms`);
    surface = "receipt";
    const r = await waitFor("receipt");
    if (r.deliveryId !== seat.delivery.deliveryId) throw new Error(`the receipt names ${r.deliveryId}`);
    surface = "follow-up";
    const settled = await waitFor("settled");
    if (settled.aborted) throw new Error("the brief's turn was aborted");
    surface = "tool-error";
    const t = marks.get("toolError");
    if (!t) throw new Error("the probe tool was never called");
    if (!t.isError) throw new Error("an MCP error result did not become a Pi tool error");
    surface = "layout";
    const sessions = join(agentDir, "sessions");
    const rel = relative(sessions, s.file);
    if (rel.startsWith("..") || !/^--[^/]*--\/[^/]+_[0-9a-f-]+\.jsonl$/.test(rel) || !rel.endsWith(`_${s.id}.jsonl`)) {
      throw new Error(`the session file is not where the worker looks: ${rel}`);
    }
    if (!existsSync(s.file)) throw new Error("the session file was not written");
    const header = JSON.parse(readFileSync(s.file, "utf8").split("\n")[0]);
    if (header.type !== "session" || header.id !== s.id) throw new Error("the session file's header names another session");
    say({ ok: true, release, surfaces: ["session", "dialog", "receipt", "follow-up", "tool-error", "layout"], ms: Date.now() - started });
    return 0;
  } catch (e) {
    say({ ok: false, release, surface, error: String(e?.message ?? e) });
    return 1;
  } finally {
    globalThis.__clankieProbe?.runtime?.stop();
    seat.close();
    try { session?.dispose(); } catch { /* gone */ }
    model?.close();
    rmSync(root, { recursive: true, force: true });
  }
}

process.exit(await main());
