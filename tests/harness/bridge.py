"""The fleet bridge, `clankie mcp --fleet`, as the MCP stdio server a
harness in a pane starts (no token: the kernel proves the pane)."""
import os

from mcp import StdioServerParameters


def fleet(clankie: str, *extra: str) -> StdioServerParameters:
    """The bridge's launch parameters, with this process's environment."""
    return StdioServerParameters(
        command=clankie, args=["mcp", "--fleet", *extra], env=dict(os.environ)
    )


def envelope(result):
    """A tool result's structured content; for a `clankie_call` answer that
    passed an upstream result through, clankie's account of the call from
    `_meta` with the upstream's own result under "result" (as the Rust
    tests' `structured()` reads it)."""
    meta = result.meta or {}
    if "clankie/outcome" not in meta or meta.get("clankie/envelope"):
        return result.structured_content
    upstream = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    own = {k: v for k, v in (upstream.get("_meta") or {}).items() if not k.startswith("clankie/")}
    if own:
        upstream["_meta"] = own
    else:
        upstream.pop("_meta", None)
    upstream.pop("resultType", None)
    body = {
        "receiptId": meta.get("clankie/receiptId"),
        "outcome": meta.get("clankie/outcome"),
        "name": meta.get("clankie/name"),
        "fromReceipt": meta.get("clankie/fromReceipt", False),
        "result": upstream,
    }
    for key, name in (("clankie/detail", "detail"), ("clankie/trimmed", "trimmed")):
        if key in meta:
            body[name] = meta[key]
    return body


def outcome(result) -> dict:
    """A tool result as the tests read it: {"isError", "result"}."""
    return {"isError": bool(result.is_error), "result": envelope(result)}
