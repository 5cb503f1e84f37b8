"""The fleet bridge, `clankie mcp --fleet`, as the MCP stdio server a
harness in a pane starts (no token: the kernel proves the pane)."""
import os

from mcp import StdioServerParameters


def fleet(clankie: str, *extra: str) -> StdioServerParameters:
    """The bridge's launch parameters, with this process's environment."""
    return StdioServerParameters(
        command=clankie, args=["mcp", "--fleet", *extra], env=dict(os.environ)
    )


def outcome(result) -> dict:
    """A tool result as the tests read it: {"isError", "result"}."""
    return {"isError": bool(result.is_error), "result": result.structured_content}
