// The Pi extension that makes the pane's Pi a Clankie fleet worker:
//
//   pi --extension …/worker.mjs
//
// Only the session Pi starts with in its TUI gets fleet tools. It attaches
// one MCP consumer (one `clankie mcp --fleet` subprocess) and registers the
// bridge's tools under the bridge's own names, schemas and instructions; a
// schema whose top level combines alternatives is flattened for the model
// (schema.mjs) and the bridge still validates the real one. RPC or print
// mode, a replaced session, a lost controller or a lost MCP process never
// reconnect or launch a replacement: their tools refuse from then on.
//
// A call is forwarded once. Cancellation or a lost reply is reported as
// possibly applied, with the receipt to reconcile, and never replayed.

import { appendFileSync, readFileSync } from "node:fs";

import { mintReceipt, readCallMeta } from "./fleet.mjs";
import { McpProcessClient } from "./mcp-client.mjs";
import { describe, flatten } from "./schema.mjs";
import { errorOverride } from "./tool-errors.mjs";
import { WorkerConnection } from "./worker-connection.mjs";
import { WorkerRuntime } from "./worker-runtime.mjs";

const CALL = "clankie_call";

function logger() {
  const file = process.env.CLANKIE_PI_LOG;
  return (event, data = {}) => {
    if (!file) return;
    try {
      // `at`: wall-clock ms with a sub-ms fraction, for the benchmarks.
      const at = performance.timeOrigin + performance.now();
      appendFileSync(file, JSON.stringify({ t: Date.now(), at, event, ...data }) + "\n");
    } catch {
      /* the log is best effort */
    }
  };
}

export default function clankieWorker(pi) {
  const log = logger();
  /** @type {McpProcessClient | null} */
  let mcp = null;
  let started = false;
  /** Why the fleet tools no longer forward (null while they do). */
  let ended = null;
  /** The definitions the bridge lists now, by name. */
  let current = new Map();
  /** Every name this extension ever registered. */
  const ours = new Set();
  /** The bridge's instructions, for the system prompt's guidelines. */
  let instructions = "";
  /** Tool calls whose MCP result was an error, by tool call id. */
  const failed = errorOverride(pi);
  let runtime = null;

  // The tools end for good; deliveries still reach Pi (the controller is
  // apart from the MCP process) unless the session itself ends.
  const end = (why, { controller = false } = {}) => {
    if (controller) runtime?.stop();
    if (ended) return;
    ended = why;
    log("fleet.ended", { why });
    try {
      pi.setActiveTools(pi.getActiveTools().filter((n) => !ours.has(n)));
    } catch {
      /* the session may be gone */
    }
  };

  // One listing at a time: a change heard mid-listing lists again after.
  let listing = Promise.resolve();
  const refresh = () => (listing = listing.then(listOnce, listOnce));

  const listOnce = async () => {
    if (ended || !mcp) return;
    let tools;
    try {
      tools = await mcp.listTools();
    } catch (e) {
      log("tools.relist_failed", { error: e.message });
      return;
    }
    const before = new Set(pi.getActiveTools());
    const next = new Map(tools.map((t) => [t.name, t]));
    for (const t of tools) register(t);
    // Withdrawn tools go inactive; tools the owner turned off stay off.
    const disabled = [...ours].filter((n) => current.has(n) && !before.has(n));
    const active = [...before].filter((n) => !ours.has(n) || next.has(n));
    for (const name of next.keys()) {
      if (!current.has(name) && !disabled.includes(name)) active.push(name);
    }
    current = next;
    pi.setActiveTools([...new Set(active)].filter((n) => !disabled.includes(n)));
    log("tools.listed", { names: [...next.keys()] });
  };

  const register = (tool) => {
    const { schema, alternatives } = flatten(tool.inputSchema);
    ours.add(tool.name);
    pi.registerTool({
      name: tool.name,
      label: tool.title ?? tool.name,
      description: describe(tool.description, alternatives),
      promptSnippet: String(tool.description ?? "").split(". ")[0].slice(0, 200),
      // The bridge's own instructions, once, beside its search tool.
      ...(instructions && tool.name === "clankie_tools" ? { promptGuidelines: [instructions] } : {}),
      parameters: schema,
      execute: (toolCallId, params, signal) => forward(tool.name, toolCallId, params, signal),
    });
  };

  // The lead hears that a run working on its delivery was stopped in Pi:
  // the seat's own report, said as the extension's observation.
  const reportInterruption = async (ids) => {
    if (ended || !mcp || !current.has("message_clankie")) return;
    const text = `[observed by the Pi worker extension] the run for ${ids.join(", ")} was interrupted in Pi before it finished; its work may be partial.`;
    try {
      await mcp.callTool("message_clankie", { text });
      log("interruption.reported", { deliveryIds: ids });
    } catch (e) {
      log("interruption.unreported", { error: e.message });
    }
  };

  const forward = async (name, toolCallId, params, signal) => {
    // A held definition the bridge no longer lists refuses here.
    if (ended) throw new Error(`${name} is not available: ${ended}; nothing was sent`);
    if (!current.has(name)) {
      throw new Error(`${name} was withdrawn from the fleet catalog; nothing was sent`);
    }
    const args = { ...(params ?? {}) };
    // The receipt is chosen before anything leaves, so a lost answer can
    // still be reconciled by it.
    if (name === CALL && typeof args.name === "string" && !args.receiptId) {
      args.receiptId = mintReceipt("call");
    }
    const receiptId = typeof args.receiptId === "string" ? args.receiptId : undefined;
    log("call.sent", { tool: name, receiptId });
    let result;
    try {
      result = await mcp.callTool(name, args, { signal });
    } catch (e) {
      if (e?.code !== undefined && e.name !== "AbortError") {
        // The bridge refused the request: nothing ran.
        throw new Error(`${name} was refused: ${e.message}`);
      }
      log("call.uncertain", { tool: name, receiptId });
      failed.add(toolCallId);
      return {
        content: [{
          type: "text",
          text: receiptId
            ? `The call may have applied (${e.name === "AbortError" ? "cancelled" : "no reply"}). Do not repeat it: reconcile with clankie_call({"receiptId": "${receiptId}"}).`
            : `The call may have applied (${e.name === "AbortError" ? "cancelled" : "no reply"}). Do not repeat it.`,
        }],
        details: { outcome: "uncertain", receiptId },
        isError: true,
      };
    }
    const meta = result._meta ?? {};
    const account = readCallMeta(meta);
    const receipt = account?.receiptId ?? result.structuredContent?.receiptId ?? receiptId;
    if (result.isError) failed.add(toolCallId);
    log("call.answered", { tool: name, receiptId: receipt, isError: !!result.isError });
    return {
      content: (result.content ?? []).map(toPiBlock),
      details: { receiptId: receipt, outcome: account?.outcome, structuredContent: result.structuredContent, meta },
      structuredContent: result.structuredContent,
      isError: !!result.isError,
    };
  };

  pi.on("message_start", (event) => runtime?.onMessageStart(event.message));
  pi.on("agent_settled", (event) => runtime?.onSettled(event));

  pi.on("session_shutdown", () => {
    end("the session ended", { controller: true });
    mcp?.close();
  });
  pi.on("session_before_switch", () => end("the session was replaced", { controller: true }));

  pi.on("session_start", async (event, ctx) => {
    if (started) {
      end("a replaced session does not receive fleet tools", { controller: true });
      return;
    }
    started = true;
    const session = { id: ctx.sessionManager.getSessionId(), file: ctx.sessionManager.getSessionFile() ?? null };
    log("session.started", { mode: ctx.mode, reason: event.reason, sessionId: session.id, sessionFile: session.file });
    if (ctx.mode !== "tui" || event.reason !== "startup") {
      ended = `fleet tools are for the initial TUI session only (this is ${ctx.mode}, ${event.reason})`;
      log("fleet.skipped", { why: ended });
      return;
    }
    const clankie = process.env.CLANKIE_BIN || "clankie";
    mcp = new McpProcessClient(clankie, ["mcp", "--fleet"], {
      // The seat channel is this extension's: the bridge must not claim.
      env: { ...process.env, CLANKIE_FLEET_NO_CHANNEL: "true" },
      onToolsChanged: () => void refresh(),
      onLost: (why) => end(why),
    });
    try {
      const init = await mcp.initialize({ name: "clankie-pi-worker", version: "0.1.0" });
      instructions = typeof init.instructions === "string" ? init.instructions : "";
      log("fleet.attached", { server: init.serverInfo?.name, instructions: !!instructions });
      await refresh();
    } catch (e) {
      end(`the fleet bridge did not start: ${e.message}`);
    }
    const pane = process.env.TMUX_PANE || process.env.HERDR_PANE_ID || "";
    const socket = gatewaySocket();
    if (pane && socket) {
      runtime = new WorkerRuntime({
        connection: new WorkerConnection({ socket, pane }),
        pi,
        log,
        onInterrupted: (ids) => void reportInterruption(ids),
      });
      runtime.run(ctx).catch((e) => end(`the controller was lost: ${e.message}`, { controller: true }));
    }
  });
}

/** The gateway's local socket: the hire's discovery file names it. */
function gatewaySocket() {
  if (process.env.CLANKIE_MCP_SOCKET) return process.env.CLANKIE_MCP_SOCKET;
  const file = process.env.CLANKIE_GATEWAY_DISCOVERY;
  if (!file) return "";
  try {
    return String(JSON.parse(readFileSync(file, "utf8")).unix ?? "");
  } catch {
    return "";
  }
}

/** An MCP content block as Pi holds it (text and images; the rest as text). */
function toPiBlock(block) {
  if (block?.type === "text") return { type: "text", text: block.text ?? "" };
  if (block?.type === "image") return { type: "image", data: block.data, mimeType: block.mimeType };
  return { type: "text", text: JSON.stringify(block) };
}

// Which Pi session a Herdr pane runs is Herdr's own integration's to say:
// Herdr 0.8 keeps a session report only from its own agent sources
// (`herdr:pi`, with its sequence) and answers every other one `ok` while
// dropping it, so a report from this extension would change nothing.
