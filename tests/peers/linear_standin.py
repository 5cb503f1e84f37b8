"""A stand-in for Linear's MCP server, for routing tests only.

Linear itself is out of reach from the test machines. This server answers a
few of Linear's tool names (get_issue, list_issues, save_issue,
save_comment, list_comments, graphql, the worker-publishing
create_worker_comment and create_worker_issue, get_user and get_workspace for
verification, and get_project for project validation), appends each call's arguments as one
JSON line to LOG, and marks every answer {"source": "linear-standin"} so a
test can tell where a call went.

Usage: python linear_standin.py LOG
"""
import json
import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("linear-standin")
LOG = sys.argv[1] if len(sys.argv) > 1 else os.devnull


def _answer(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return {"source": "linear-standin", "tool": tool, "arguments": arguments}


@server.tool()
def get_issue(id: str, includeRelations: bool = False) -> dict[str, Any]:
    """Get an issue from Linear."""
    return _answer("get_issue", {"id": id, "includeRelations": includeRelations})


@server.tool()
def list_issues(team: str | None = None, query: str | None = None, limit: int = 50) -> dict[str, Any]:
    """List issues in Linear."""
    return _answer("list_issues", {"team": team, "query": query, "limit": limit})


@server.tool()
def save_issue(title: str | None = None, team: str | None = None, id: str | None = None,
               state: str | None = None, description: str | None = None) -> dict[str, Any]:
    """Create or update an issue in Linear."""
    return _answer("save_issue", {"title": title, "team": team, "id": id, "state": state,
                                  "description": description})


@server.tool()
def save_comment(issueId: str, body: str) -> dict[str, Any]:
    """Comment on an issue in Linear."""
    return _answer("save_comment", {"issueId": issueId, "body": body})


@server.tool()
def list_comments(issueId: str) -> dict[str, Any]:
    """List an issue's comments in Linear."""
    return _answer("list_comments", {"issueId": issueId})


@server.tool()
def graphql(query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run a GraphQL document against Linear's API."""
    return _answer("graphql", {"query": query, "variables": variables})


@server.tool()
def create_worker_comment(issueId: str, body: str, personaId: str) -> dict[str, Any]:
    """Comment on an issue as a worker persona (worker publishing)."""
    return _answer("create_worker_comment", {"issueId": issueId, "body": body, "personaId": personaId})


@server.tool()
def create_worker_issue(team: str, title: str, personaId: str) -> dict[str, Any]:
    """File an issue as a worker persona (worker publishing)."""
    return _answer("create_worker_issue", {"team": team, "title": title, "personaId": personaId})


# Who this stand-in says the connected user is: STANDIN_USER and
# STANDIN_WORKSPACE; STANDIN_IDENTITY_FAIL makes get_user fail, as a revoked
# or mis-scoped credential would.
@server.tool()
def get_user(query: str) -> dict[str, Any]:
    """Read a user; query "me" is the connected one."""
    if os.environ.get("STANDIN_IDENTITY_FAIL"):
        raise ValueError("authentication failed")
    user = os.environ.get("STANDIN_USER", "user-1")
    return {"id": user, "name": user, "email": f"{user}@example.test", "query": query}


# The projects this stand-in's workspace has: STANDIN_PROJECTS, comma
# separated UUIDs (none when unset).
@server.tool()
def get_project(query: str) -> dict[str, Any]:
    """Read a project by id."""
    known = [p for p in os.environ.get("STANDIN_PROJECTS", "").split(",") if p]
    if query not in known:
        raise ValueError(f"Entity not found: Project {query}")
    return {"id": query, "name": f"Project {query[:8]}"}


@server.tool()
def get_workspace() -> dict[str, Any]:
    """Read the connected workspace."""
    ws = os.environ.get("STANDIN_WORKSPACE", "workspace-1")
    return {"id": ws, "name": f"Workspace {ws}", "urlKey": ws}


if __name__ == "__main__":
    server.run()
