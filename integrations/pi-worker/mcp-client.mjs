// One MCP client over a child process's stdio: newline-delimited JSON-RPC
// 2.0, as the MCP stdio transport defines it. It starts its server once
// and never again: a lost process is reported, not replaced.
//
// Lines are bounded UTF-8: a line longer than MAX_LINE, or one that is not
// valid UTF-8 or JSON, ends the session with a clear error.

import { spawn } from "node:child_process";
import { StringDecoder } from "node:string_decoder";

/** The longest line accepted from the server (a tool result with images). */
export const MAX_LINE = 16 * 1024 * 1024;

/** The MCP protocol revision this client speaks first. */
const PROTOCOL = "2025-06-18";

export class McpProcessClient {
  /**
   * @param {string} command
   * @param {string[]} args
   * @param {{ env?: object, onToolsChanged?: () => void, onLost?: (why: string) => void,
   *           onNotification?: (method: string, params: object) => void }} hooks
   */
  constructor(command, args, hooks = {}) {
    this.hooks = hooks;
    this.nextId = 1;
    this.pending = new Map();
    this.lost = null;
    this.buffer = Buffer.alloc(0);
    this.child = spawn(command, args, {
      env: hooks.env ?? process.env,
      stdio: ["pipe", "pipe", "ignore"],
    });
    this.child.stdout.on("data", (chunk) => this.#read(chunk));
    this.child.on("error", (e) => this.#lose(`the MCP process could not run: ${e.message}`));
    this.child.on("exit", (code, signal) =>
      this.#lose(`the MCP process ended (${signal ?? `exit ${code}`}); it is not relaunched`),
    );
    this.child.stdin.on("error", () => {});
  }

  /** The handshake: server info, capabilities and instructions. */
  async initialize(clientInfo) {
    const init = await this.request("initialize", {
      protocolVersion: PROTOCOL,
      capabilities: {},
      clientInfo,
    });
    this.notify("notifications/initialized", {});
    return init;
  }

  /** Every tool the server lists, across pages. */
  async listTools() {
    const tools = [];
    let cursor;
    do {
      const page = await this.request("tools/list", cursor ? { cursor } : {});
      tools.push(...(page.tools ?? []));
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  }

  /**
   * Calls a tool once. `signal` aborting sends notifications/cancelled and
   * rejects with an AbortError: the call may have applied.
   */
  callTool(name, args, { signal, meta } = {}) {
    const params = { name, arguments: args ?? {} };
    if (meta) params._meta = meta;
    return this.request("tools/call", params, signal);
  }

  request(method, params, signal) {
    if (this.lost) return Promise.reject(new LostError(this.lost));
    if (signal?.aborted) return Promise.reject(abortError());
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        if (!this.pending.delete(id)) return;
        this.notify("notifications/cancelled", { requestId: id, reason: "cancelled by the caller" });
        reject(abortError());
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.pending.set(id, {
        resolve: (v) => { signal?.removeEventListener("abort", onAbort); resolve(v); },
        reject: (e) => { signal?.removeEventListener("abort", onAbort); reject(e); },
      });
      this.#write({ jsonrpc: "2.0", id, method, params });
    });
  }

  notify(method, params) {
    if (!this.lost) this.#write({ jsonrpc: "2.0", method, params });
  }

  /** Ends the server process; pending calls are lost. */
  close() {
    this.#lose("the MCP session was closed");
    try { this.child.kill(); } catch { /* already gone */ }
  }

  #write(message) {
    try {
      this.child.stdin.write(JSON.stringify(message) + "\n");
    } catch (e) {
      this.#lose(`the MCP process cannot be written to: ${e.message}`);
    }
  }

  #read(chunk) {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    let nl;
    while ((nl = this.buffer.indexOf(0x0a)) >= 0) {
      const line = this.buffer.subarray(0, nl);
      this.buffer = this.buffer.subarray(nl + 1);
      if (line.length > MAX_LINE) return this.#fail(`a line of ${line.length} bytes is over the ${MAX_LINE}-byte bound`);
      const text = decode(line);
      if (text === null) return this.#fail("the MCP process sent a line that is not valid UTF-8");
      if (!text.trim()) continue;
      let message;
      try { message = JSON.parse(text); } catch { return this.#fail("the MCP process sent a line that is not JSON"); }
      this.#dispatch(message);
    }
    if (this.buffer.length > MAX_LINE) this.#fail(`a line over the ${MAX_LINE}-byte bound`);
  }

  #dispatch(m) {
    if (m === null || typeof m !== "object") return;
    if ("id" in m && ("result" in m || "error" in m) && !("method" in m)) {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      if (m.error) p.reject(new McpError(m.error));
      else p.resolve(m.result ?? {});
      return;
    }
    if (typeof m.method !== "string") return;
    if ("id" in m) {
      // Requests from the server: only ping is ours to answer.
      if (m.method === "ping") this.#write({ jsonrpc: "2.0", id: m.id, result: {} });
      else this.#write({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: `${m.method} is not supported here` } });
      return;
    }
    if (m.method === "notifications/tools/list_changed") this.hooks.onToolsChanged?.();
    this.hooks.onNotification?.(m.method, m.params ?? {});
  }

  #fail(why) {
    this.#lose(why);
    try { this.child.kill(); } catch { /* gone */ }
  }

  #lose(why) {
    if (this.lost) return;
    this.lost = why;
    for (const p of this.pending.values()) p.reject(new LostError(why));
    this.pending.clear();
    this.hooks.onLost?.(why);
  }
}

/** The server answered with a JSON-RPC error: nothing ran. */
export class McpError extends Error {
  constructor(error) {
    super(String(error?.message ?? "MCP error"));
    this.code = error?.code;
    this.data = error?.data;
  }
}

/** The process went away with the request unanswered: it may have applied. */
export class LostError extends Error {}

function abortError() {
  const e = new Error("the call was cancelled");
  e.name = "AbortError";
  return e;
}

function decode(bytes) {
  const d = new StringDecoder("utf8");
  const text = d.write(bytes) + d.end();
  // StringDecoder replaces bad sequences with U+FFFD; a round trip tells.
  return Buffer.from(text, "utf8").equals(bytes) ? text : null;
}
