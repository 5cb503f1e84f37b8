"""The fleet bridge, `clankie mcp --fleet`, as the MCP stdio server a
harness in a pane starts (no token: the kernel proves the pane)."""
import json
import os
import pathlib

from mcp import StdioServerParameters


def fleet(clankie: str, *extra: str) -> StdioServerParameters:
    """The bridge's launch parameters, with this process's environment."""
    return StdioServerParameters(
        command=clankie, args=["mcp", "--fleet", *extra], env=dict(os.environ)
    )


# The call's account in `_meta`, by the keys the fleet contract's golden file
# names (types/fixtures/fleet/meta_keys.json), never spelled here.
META = json.loads(
    (pathlib.Path(__file__).resolve().parents[2] / "types/fixtures/fleet/meta_keys.json").read_text()
)


def envelope(result):
    """A tool result's structured content; for a `clankie_call` answer that
    passed an upstream result through, clankie's account of the call from
    `_meta` with the upstream's own result under "result" (as the Rust
    tests' `structured()` reads it)."""
    meta = result.meta or {}
    if META["outcome"] not in meta or meta.get(META["envelope"]):
        return result.structured_content
    upstream = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    own = {k: v for k, v in (upstream.get("_meta") or {}).items() if not k.startswith(META["prefix"])}
    if own:
        upstream["_meta"] = own
    else:
        upstream.pop("_meta", None)
    upstream.pop("resultType", None)
    body = {
        "receiptId": meta.get(META["receiptId"]),
        "outcome": meta.get(META["outcome"]),
        "name": meta.get(META["name"]),
        "fromReceipt": meta.get(META["fromReceipt"], False),
        "result": upstream,
    }
    for name in ("detail", "trimmed"):
        if META[name] in meta:
            body[name] = meta[META[name]]
    return body


def outcome(result) -> dict:
    """A tool result as the tests read it: {"isError", "result"}."""
    return {"isError": bool(result.is_error), "result": envelope(result)}
