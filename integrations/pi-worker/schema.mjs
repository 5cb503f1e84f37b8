// Tool schemas as a model provider will take them.
//
// Pi hands a tool's parameters to the provider as given, and providers
// refuse a schema whose top level is `anyOf`, `oneOf` or `allOf`
// (clankie_call's is: a name, or a receiptId alone). Such a schema becomes
// one object holding every branch's properties; what each branch requires
// is said in the description. The MCP server still validates the real
// schema on every call, so nothing the flat form allows gets past it.

const COMBINERS = ["anyOf", "oneOf", "allOf"];

/** Whether a schema's top level combines alternatives. */
export function combines(schema) {
  return isObject(schema) && COMBINERS.some((k) => Array.isArray(schema[k]));
}

/**
 * The flat form of `schema` and the sentence that states its alternatives
 * (empty when the schema was already flat).
 * @returns {{ schema: object, alternatives: string }}
 */
export function flatten(schema) {
  if (!combines(schema)) {
    return { schema: isObject(schema) ? schema : { type: "object" }, alternatives: "" };
  }
  const flat = { type: "object", properties: { ...(schema.properties ?? {}) } };
  const required = new Set(schema.required ?? []);
  const said = [];
  for (const key of COMBINERS) {
    const branches = schema[key];
    if (!Array.isArray(branches)) continue;
    const needs = branches.map((b) => {
      const branch = isObject(b) ? b : {};
      for (const [name, prop] of Object.entries(branch.properties ?? {})) {
        if (!(name in flat.properties)) flat.properties[name] = prop;
      }
      return Array.isArray(branch.required) ? branch.required : [];
    });
    if (key === "allOf") {
      // Every branch holds: each one's required names are required.
      for (const n of needs) n.forEach((name) => required.add(name));
    } else {
      // One branch holds: only what all of them require is required.
      const common = needs.reduce((acc, n) => acc.filter((name) => n.includes(name)), needs[0] ?? []);
      common.forEach((name) => required.add(name));
      const ways = needs.map((n) => (n.length ? n.join(" and ") : "no particular field"));
      said.push(`${key === "oneOf" ? "Exactly one" : "At least one"} of these forms: ${ways.map((w, i) => `(${i + 1}) ${w}`).join("; ")}.`);
    }
  }
  if (required.size) flat.required = [...required];
  if (schema.additionalProperties === false) flat.additionalProperties = false;
  if (typeof schema.description === "string") flat.description = schema.description;
  return { schema: flat, alternatives: said.join(" ") };
}

/** A tool's description with its schema's alternatives stated. */
export function describe(description, alternatives) {
  const base = typeof description === "string" ? description : "";
  if (!alternatives) return base;
  return base ? `${base}\n\nArguments: ${alternatives}` : `Arguments: ${alternatives}`;
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}
