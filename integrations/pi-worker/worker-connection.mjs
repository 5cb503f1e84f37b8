// The extension's one control connection to the stack: HTTP/1.1 kept alive
// over the gateway's local Unix socket, so every request on it comes from
// this process and the kernel proves which pane that is, and that this is
// the harness itself: the seat's control routes refuse a process Pi
// starts. No secret travels: there is none to steal.
//
// Answers are bounded UTF-8 JSON: a body over MAX_BODY, or one that is not
// valid UTF-8 or JSON, closes the connection with a clear error.

import http from "node:http";

import { seatPath } from "./fleet.mjs";

/** The largest answer accepted from the stack. */
export const MAX_BODY = 1024 * 1024;

export class WorkerConnection {
  /** @param {{ socket: string, pane: string }} endpoint */
  constructor({ socket, pane }) {
    if (!socket) throw new Error("no stack endpoint was prepared for this launch");
    this.socket = socket;
    this.pane = pane;
    // One socket, kept alive: the stack proves this process once per connection.
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  }

  /** The seat's mailbox, waiting up to `waitMs` for a delivery. */
  poll(waitMs, revision = "") {
    const q = `wait=${waitMs}&revision=${encodeURIComponent(revision)}`;
    return this.request("GET", `${seatPath("Mailbox", this.pane)}?${q}`, undefined, waitMs + 10_000);
  }

  claim(ids) {
    return this.request("POST", seatPath("Claim", this.pane), { deliveryIds: ids });
  }

  ack(deliveryId, claimId) {
    return this.request("POST", seatPath("Ack", this.pane), { deliveryId, claimId });
  }

  release(deliveryId, claimId) {
    return this.request("POST", seatPath("Release", this.pane), { deliveryId, claimId });
  }

  close() {
    this.agent.destroy();
  }

  /** One request; resolves `{ status, body }`, rejects when no answer came. */
  request(method, path, body, timeoutMs = 30_000) {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          socketPath: this.socket,
          agent: this.agent,
          method,
          path,
          headers: {
            host: "localhost",
            ...(payload ? { "content-type": "application/json", "content-length": payload.length } : {}),
          },
          timeout: timeoutMs,
        },
        (res) => {
          const chunks = [];
          let size = 0;
          res.on("data", (c) => {
            size += c.length;
            if (size > MAX_BODY) {
              req.destroy(new Error(`the stack sent more than ${MAX_BODY} bytes; the connection is closed`));
              return;
            }
            chunks.push(c);
          });
          res.on("end", () => {
            let text;
            try {
              text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
            } catch {
              this.close();
              return reject(new Error("the stack sent an answer that is not valid UTF-8; the connection is closed"));
            }
            let parsed = {};
            if (text.trim()) {
              try { parsed = JSON.parse(text); } catch {
                this.close();
                return reject(new Error("the stack sent an answer that is not JSON; the connection is closed"));
              }
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(new Error("no answer from the stack in time")));
      req.on("error", reject);
      if (payload) req.write(payload);
      req.end();
    });
  }
}
