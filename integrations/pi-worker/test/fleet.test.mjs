import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  DELIVERY_KINDS,
  deliverySource,
  META,
  OUTCOMES,
  SEAT_ROUTES,
  mintReceipt,
  readCallMeta,
  receiptIdOk,
  seatPath,
  steers,
} from "../fleet.mjs";

const golden = (name) =>
  JSON.parse(readFileSync(new URL(`../../../types/fixtures/fleet/${name}`, import.meta.url)));

test("receipt ids follow the golden rule and prefixes", () => {
  const f = golden("receipt_ids.json");
  for (const id of f.valid) assert.ok(receiptIdOk(id), id);
  for (const id of f.invalid) assert.ok(!receiptIdOk(id), id);
  for (const [kind, prefix] of Object.entries(f.prefixes)) {
    const id = mintReceipt(kind);
    assert.ok(id.startsWith(prefix) && receiptIdOk(id), id);
  }
});

test("outcomes are the golden words", () => {
  assert.deepEqual([...OUTCOMES], golden("outcomes.json"));
});

test("the call's account reads from the golden _meta", () => {
  for (const c of golden("call_meta.json")) {
    assert.deepEqual(readCallMeta(c._meta), { receiptId: c.receiptId, outcome: c.outcome });
    for (const key of Object.keys(c._meta)) assert.ok(Object.values(META).includes(key), key);
  }
  assert.equal(readCallMeta({}), undefined);
});

test("delivery kinds and which steers are the golden ones", () => {
  assert.deepEqual(DELIVERY_KINDS, golden("delivery_kinds.json"));
  for (const [kind, { steers: s, source }] of Object.entries(DELIVERY_KINDS)) {
    assert.equal(steers(kind), s);
    assert.equal(deliverySource(kind), source);
  }
  assert.equal(steers("unknown"), true);
  assert.equal(deliverySource("unknown"), "lead");
});

test("the _meta keys are the golden ones", () => {
  const keys = golden("meta_keys.json");
  for (const [field, key] of Object.entries(META)) assert.equal(keys[field], key, field);
});

test("the seat routes are the golden ones", () => {
  const routes = golden("seat.json").routes;
  for (const [name, { method, tail }] of Object.entries(SEAT_ROUTES)) {
    assert.equal(routes[name].method, method, name);
    assert.equal(routes[name].path, `/v1/fleet/seats/{pane}${tail}`, name);
  }
  assert.equal(seatPath("Ack", "%1"), "/v1/fleet/seats/%251/mailbox/ack");
});
