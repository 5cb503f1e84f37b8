// The release probe's extension, loaded through Pi's own extension loader.
// It binds the real worker runtime (worker-runtime.mjs) and the real
// tool-error override (tool-errors.mjs) to the probe's session, and
// records what each surface did for probe.mjs to judge.

import { errorOverride } from "./tool-errors.mjs";
import { WorkerRuntime } from "./worker-runtime.mjs";

/** The tool the probe's model calls: it answers as an MCP tool error. */
export const PROBE_TOOL = "clankie_probe_error";

export default function probeExtension(pi) {
  const probe = globalThis.__clankieProbe;
  if (!probe) return;
  const failed = errorOverride(pi);
  let runtime = null;

  pi.registerTool({
    name: PROBE_TOOL,
    label: "Probe error",
    description: "Answers with an MCP tool error (the release probe).",
    parameters: { type: "object", properties: {} },
    execute: async (toolCallId) => {
      failed.add(toolCallId);
      return { content: [{ type: "text", text: "the probe's MCP tool error" }], details: {}, isError: true };
    },
  });
  pi.on("tool_execution_end", (event) => {
    if (event.toolName === PROBE_TOOL) probe.mark("toolError", { isError: !!event.isError });
  });
  pi.on("message_start", (event) => runtime?.onMessageStart(event.message));
  pi.on("agent_settled", (event) => {
    runtime?.onSettled(event);
    probe.mark("settled", { aborted: !!event?.aborted });
  });
  pi.on("session_start", async (event, ctx) => {
    probe.mark("session", {
      id: ctx.sessionManager.getSessionId(),
      file: ctx.sessionManager.getSessionFile() ?? null,
      mode: ctx.mode,
    });
    // A dialog must never hold the worker: without a UI it answers at once.
    const asked = Date.now();
    const answer = await ctx.ui.confirm("Clankie probe", "Does a dialog block?", { timeout: 2000 });
    probe.mark("dialog", { ms: Date.now() - asked, answer });
    runtime = new WorkerRuntime({ connection: probe.connection, pi, log: probe.log });
    runtime.run(ctx).catch((e) => probe.mark("runtimeFailed", { error: e.message }));
    probe.runtime = runtime;
  });
}
