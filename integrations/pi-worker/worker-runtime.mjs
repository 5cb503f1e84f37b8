// The lead's deliveries, turned into Pi messages.
//
// The seat's mailbox is read over the control connection. Each listed
// delivery is claimed (a claim is exclusive and survives lost answers),
// handed to Pi as a user message (while Pi works: the lead's steers the
// run, a peer's waits as a follow-up), and
// acknowledged under its claim only once Pi has taken it: when the message
// starts in the session. That acknowledgement is the delivery receipt the
// lead sees. A delivery Pi did not take in time stays claimed: it may yet
// arrive, so it is never handed over twice. When the run it started has
// settled, the delivery is settled too; a run the user stopped is reported
// as interrupted.

import { deliverySource, steers } from "./fleet.mjs";

/** How long a poll waits for a delivery. */
const POLL_WAIT_MS = 25_000;
/** How long Pi has to take a handed-over message. */
const ACCEPT_MS = 30_000;
/** How long to wait after a failed poll. */
const RETRY_MS = 2_000;

/** The marker that ties a session message to its delivery. */
export function envelope(d) {
  const source = deliverySource(d.kind);
  const from = String(d.from ?? "").replace(/[^\w.:@-]/g, "_");
  return `<clankie-delivery id="${d.deliveryId}" source="${source}" from="${from}">\n${d.text ?? ""}\n</clankie-delivery>`;
}

function deliveryIdOf(message) {
  if (message?.role !== "user") return null;
  const content = message.content;
  const text = typeof content === "string"
    ? content
    : Array.isArray(content) ? content.map((c) => c?.text ?? "").join("") : "";
  return /<clankie-delivery id="([^"]+)"/.exec(text)?.[1] ?? null;
}

export class WorkerRuntime {
  /**
   * @param {{ connection: import("./worker-connection.mjs").WorkerConnection,
   *           pi: object, log?: (event: string, data?: object) => void }} parts
   */
  constructor({ connection, pi, log, onInterrupted }) {
    this.connection = connection;
    this.pi = pi;
    this.log = log ?? (() => {});
    /** Told the delivery ids of a run the user stopped. */
    this.onInterrupted = onInterrupted ?? (() => {});
    this.waiting = new Map(); // deliveryId -> resolve(accepted)
    this.running = new Set(); // deliveryIds taken, not settled
    this.stopped = false;
    this.ctx = null;
  }

  /** Session events the runtime follows (the extension forwards them). */
  onMessageStart(message) {
    const id = deliveryIdOf(message);
    if (!id) return;
    this.log("delivery.taken", { deliveryId: id });
    this.running.add(id);
    this.waiting.get(id)?.(true);
  }

  onSettled(event) {
    const ids = [...this.running];
    this.running.clear();
    for (const id of ids) {
      this.log(event?.aborted ? "delivery.interrupted" : "delivery.settled", { deliveryId: id });
    }
    // Pi 1.x says when a run was aborted; 0.87 does not.
    if (event?.aborted && ids.length) this.onInterrupted(ids);
  }

  /** Reads the mailbox until stopped. */
  async run(ctx) {
    this.ctx = ctx;
    let revision = "";
    while (!this.stopped) {
      let answer;
      try {
        answer = await this.connection.poll(POLL_WAIT_MS, revision);
      } catch (e) {
        this.log("poll.failed", { error: e.message });
        await sleep(RETRY_MS);
        continue;
      }
      if (answer.status !== 200) {
        this.log("poll.refused", { status: answer.status, code: answer.body?.error?.code });
        await sleep(RETRY_MS * 5);
        continue;
      }
      revision = answer.body.catalogRevision ?? revision;
      const listed = answer.body.deliveries ?? [];
      if (listed.length) await this.take(listed);
    }
  }

  stop() {
    this.stopped = true;
    for (const resolve of this.waiting.values()) resolve(false);
    this.connection.close();
  }

  async take(listed) {
    let claimed;
    try {
      claimed = await this.connection.claim(listed.map((d) => d.deliveryId));
    } catch (e) {
      // A lost claim answer leaves them claimed: never handed over twice.
      this.log("claim.lost", { error: e.message });
      return;
    }
    if (claimed.status !== 200) {
      this.log("claim.refused", { status: claimed.status });
      return;
    }
    const claimId = claimed.body.claimId;
    for (const d of claimed.body.deliveries ?? []) {
      if (this.stopped) {
        await this.connection.release(d.deliveryId, claimId).catch(() => {});
        continue;
      }
      const accepted = await this.handOver(d);
      if (!accepted) {
        this.log("delivery.unconfirmed", { deliveryId: d.deliveryId });
        continue;
      }
      const acked = await this.connection.ack(d.deliveryId, claimId).catch((e) => ({ status: 0, error: e }));
      this.log(acked.status === 200 ? "delivery.acknowledged" : "delivery.ack_failed", {
        deliveryId: d.deliveryId,
      });
    }
  }

  /** Hands one delivery to Pi; true once Pi has taken it. */
  handOver(d) {
    const taken = new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ACCEPT_MS);
      this.waiting.set(d.deliveryId, (ok) => {
        clearTimeout(timer);
        this.waiting.delete(d.deliveryId);
        resolve(ok);
      });
    });
    // An idle Pi starts a run with it. A busy one: the lead's word steers
    // the run (it lands before Pi's next model call); a peer's, a review's
    // or a wake waits as a follow-up until the run has no more work.
    const busy = this.ctx && typeof this.ctx.isIdle === "function" && !this.ctx.isIdle();
    const deliverAs = steers(d.kind) ? "steer" : "followUp";
    this.pi.sendUserMessage(envelope(d), busy ? { deliverAs } : undefined);
    this.log("delivery.handed", { deliveryId: d.deliveryId, as: busy ? deliverAs : "prompt" });
    return taken;
  }
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}
