// The fleet's member-facing words as the extension speaks them: receipt ids,
// outcomes, the call's account in a result's `_meta` and the seat routes. The Rust contract
// (types/src/fleet/) is the source; test/fleet.test.mjs holds this file to
// the same golden JSON (types/fixtures/fleet/).

import { randomUUID } from "node:crypto";

export const META = Object.freeze({
  receiptId: "clankie/receiptId",
  outcome: "clankie/outcome",
  name: "clankie/name",
  fromReceipt: "clankie/fromReceipt",
  detail: "clankie/detail",
  trimmed: "clankie/trimmed",
  envelope: "clankie/envelope",
});

export const OUTCOMES = Object.freeze(["ok", "error", "uncertain"]);

// Whether a busy harness takes a delivery into the running turn (the
// lead's word steers) or after it, and who it is framed as from (a
// worker's report is the worker's word, never the owner's).
export const DELIVERY_KINDS = Object.freeze({
  lead: { steers: true, source: "lead" },
  peer: { steers: false, source: "peer" },
  review: { steers: false, source: "lead" },
  wake: { steers: false, source: "wake" },
  message: { steers: false, source: "worker" },
  watch: { steers: false, source: "watch" },
});

// Who a delivery of `kind` is framed as from; one of a kind this build does
// not know is the lead's.
export function deliverySource(kind) {
  return DELIVERY_KINDS[kind]?.source ?? "lead";
}

// Whether a delivery of `kind` steers a busy run; one of a kind this build
// does not know is the lead's.
export function steers(kind) {
  return DELIVERY_KINDS[kind]?.steers ?? true;
}

// The seat routes the extension uses, under /v1/fleet/seats/{pane}.
export const SEAT_ROUTES = Object.freeze({
  Mailbox: { method: "GET", tail: "/mailbox" },
  Claim: { method: "POST", tail: "/mailbox/claim" },
  Ack: { method: "POST", tail: "/mailbox/ack" },
  Release: { method: "POST", tail: "/mailbox/release" },
});

// The path of a seat route for `pane`.
export function seatPath(route, pane) {
  return `/v1/fleet/seats/${encodeURIComponent(pane)}${SEAT_ROUTES[route].tail}`;
}

const PREFIX = Object.freeze({ call: "rcpt_", report: "rpt_", peer: "peer_" });
const RULE = /^[A-Za-z0-9._:-]{1,128}$/;

// A new receipt id of a kind (call, report or peer).
export function mintReceipt(kind) {
  return `${PREFIX[kind]}${randomUUID().replaceAll("-", "")}`;
}

// Whether an id obeys the one rule every kind obeys.
export function receiptIdOk(id) {
  return typeof id === "string" && RULE.test(id);
}

// The call's account in a result's `_meta`, or undefined without a receipt.
export function readCallMeta(meta) {
  const receiptId = meta?.[META.receiptId];
  if (typeof receiptId !== "string") return undefined;
  const outcome = OUTCOMES.includes(meta[META.outcome]) ? meta[META.outcome] : undefined;
  return { receiptId, outcome };
}
