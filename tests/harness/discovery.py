"""The gateway's discovery file, `run/fleet/gateway.json`, as the gateway
writes it (the Rust struct `clankie_types::discovery::GatewayDiscovery`).

Keys: url (bearer listener), mcp (its MCP endpoint), unix (the local
socket), localMcp (the loopback TCP MCP endpoint), pid.
"""
import json
import os


def gateway(state: str | None = None) -> dict:
    """The discovery record: STATE/run/fleet/gateway.json when a state folder
    is named; else CLANKIE_GATEWAY_DISCOVERY (what a hire is told), else
    CLANKIE_STATE/run/fleet/gateway.json."""
    if state is not None:
        path = os.path.join(state, "run", "fleet", "gateway.json")
    else:
        path = os.environ.get("CLANKIE_GATEWAY_DISCOVERY") or os.path.join(
            os.environ["CLANKIE_STATE"], "run", "fleet", "gateway.json"
        )
    with open(path) as f:
        return json.load(f)


def local_tcp(found: dict) -> tuple[str, int]:
    """The host and port of the loopback TCP listener."""
    host, port = found["localMcp"].split("//")[1].split("/")[0].rsplit(":", 1)
    return host, int(port)
