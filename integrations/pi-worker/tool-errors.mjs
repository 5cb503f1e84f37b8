// An MCP tool result that says isError is a Pi tool error on every
// release: 1.x reads `isError` from the tool's result, 0.87 only from a
// `tool_result` patch, so both are given.

/**
 * Installs the override on `pi`; returns the set a tool's execute adds
 * its toolCallId to when its result was an error.
 */
export function errorOverride(pi) {
  const failed = new Set();
  pi.on("tool_result", (event) => (failed.delete(event.toolCallId) ? { isError: true } : undefined));
  return failed;
}
