import { test } from "node:test";
import assert from "node:assert/strict";
import { combines, describe, flatten } from "../schema.mjs";

import { readFileSync } from "node:fs";

// clankie_call's schema as the gateway lists it (derived in types/src/fleet/args.rs).
const clankieCall = JSON.parse(
  readFileSync(new URL("../../../types/fixtures/fleet/schemas.json", import.meta.url)),
).clankie_call;

test("a top-level anyOf becomes one object with its alternatives stated", () => {
  assert.ok(combines(clankieCall));
  const { schema, alternatives } = flatten(clankieCall);
  assert.equal(schema.anyOf, undefined);
  assert.equal(schema.type, "object");
  assert.deepEqual(Object.keys(schema.properties).sort(), ["arguments", "background", "name", "receiptId"]);
  assert.equal(schema.required, undefined, "neither name nor receiptId is required alone");
  assert.equal(schema.additionalProperties, false);
  assert.match(alternatives, /\(1\) name; \(2\) receiptId/);
  assert.match(describe("Call a tool.", alternatives), /^Call a tool\.\n\nArguments: At least one/);
});

test("branch properties join, allOf requirements add up, oneOf keeps what all require", () => {
  const { schema } = flatten({
    allOf: [
      { properties: { a: { type: "string" } }, required: ["a"] },
      { properties: { b: { type: "number" } }, required: ["b"] },
    ],
    oneOf: [{ required: ["c", "a"] }, { required: ["a"] }],
  });
  assert.deepEqual(Object.keys(schema.properties), ["a", "b"]);
  assert.deepEqual(schema.required.sort(), ["a", "b"]);
});

test("a flat schema is left as it is, and junk becomes an empty object", () => {
  const plain = { type: "object", properties: { q: { type: "string" } } };
  assert.equal(flatten(plain).schema, plain);
  assert.equal(flatten(plain).alternatives, "");
  assert.deepEqual(flatten(null).schema, { type: "object" });
  assert.deepEqual(flatten({ anyOf: "nope" }).schema, { anyOf: "nope" });
  assert.deepEqual(flatten({ anyOf: [null, 3] }).schema, { type: "object", properties: {} });
});
