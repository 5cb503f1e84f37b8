"""The three model APIs the scripted model speaks, each read into one
conversation shape and answered in its own stream.

The shape: a list of {"role": "user" | "assistant" | "tool", "content"}
(the system prompt and developer messages are left out). Tool results are
"tool" messages; a user message holding tool results counts as those
results only, so a harness's reminders beside them do not start a new turn.
Offered tools: [{"name", "parameters", "namespace"?}].
"""
import json
import time


def text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                if isinstance(p.get("text"), str):
                    parts.append(p["text"])
                elif p.get("type") == "tool_result":
                    parts.append(text_of(p.get("content")))
        return "".join(parts)
    return ""


def sse(event: str | None, body: dict) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + json.dumps(body).encode() + b"\n\n"


def resolve(name: str, tools: list) -> dict:
    """The offered tool a script's CALL names: exactly, by `__<name>`
    suffix, or inside a namespace; else the name as written."""
    for t in tools:
        if t["name"] == name and not t.get("namespace"):
            return t
    for t in tools:
        if t["name"].endswith("__" + name):
            return t
    for t in tools:
        if t.get("namespace") and t["name"] == name:
            return t
    return {"name": name}


class Chat:
    """OpenAI chat completions (Pi)."""

    name = "chat"

    def messages(self, req):
        return req.get("messages") or []

    def tools(self, req):
        return [
            {"name": t.get("function", {}).get("name"),
             "parameters": t.get("function", {}).get("parameters")}
            for t in req.get("tools") or []
        ]

    def chunk(self, req, delta, finish=None):
        return b"data: " + json.dumps({
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": req.get("model", "scripted"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }).encode() + b"\n\n"

    def call(self, req, tool, args, n):
        call = {"index": 0, "id": f"call_{n}", "type": "function",
                "function": {"name": tool["name"], "arguments": args}}
        return [
            self.chunk(req, {"role": "assistant", "content": ""}),
            self.chunk(req, {"tool_calls": [call]}),
            self.chunk(req, {}, "tool_calls"),
            b"data: [DONE]\n\n",
        ]

    def say(self, req, text):
        return [
            self.chunk(req, {"role": "assistant", "content": ""}),
            self.chunk(req, {"content": text}),
            self.chunk(req, {}, "stop"),
            b"data: [DONE]\n\n",
        ]


class Messages:
    """Anthropic Messages (Claude Code)."""

    name = "messages"

    def messages(self, req):
        out = []
        for m in req.get("messages") or []:
            role, content = m.get("role"), m.get("content")
            if role == "user" and isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content
            ):
                for b in content:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        out.append({"role": "tool", "content": text_of(b.get("content"))})
            elif role in ("user", "assistant"):
                out.append({"role": role, "content": text_of(content)})
        return out

    def tools(self, req):
        return [
            {"name": t.get("name"), "parameters": t.get("input_schema")}
            for t in req.get("tools") or []
            if t.get("name")
        ]

    def start(self, req, n):
        return sse("message_start", {"type": "message_start", "message": {
            "id": f"msg_scripted_{n}", "type": "message", "role": "assistant",
            "model": req.get("model", "scripted"), "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 0},
        }})

    def end(self, reason):
        return [
            sse("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": reason, "stop_sequence": None},
                                  "usage": {"output_tokens": 1}}),
            sse("message_stop", {"type": "message_stop"}),
        ]

    def call(self, req, tool, args, n):
        return [
            self.start(req, n),
            sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "tool_use", "id": f"toolu_{n:08d}",
                                                          "name": tool["name"], "input": {}}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "input_json_delta", "partial_json": args}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            *self.end("tool_use"),
        ]

    def say(self, req, text):
        return [
            self.start(req, 0),
            sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": text}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            *self.end("end_turn"),
        ]


class Responses:
    """OpenAI Responses (Codex)."""

    name = "responses"

    def messages(self, req):
        out = []
        items = req.get("input") or []
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        for it in items:
            kind = it.get("type", "message")
            if kind == "message" and it.get("role") in ("user", "assistant"):
                out.append({"role": it["role"], "content": text_of(it.get("content"))})
            elif kind == "function_call":
                out.append({"role": "assistant", "content": ""})
            elif kind in ("function_call_output", "custom_tool_call_output"):
                output = it.get("output")
                if isinstance(output, dict):
                    output = output.get("content", output)
                out.append({"role": "tool", "content": text_of(output)})
        return out

    def tools(self, req):
        out = []
        for t in req.get("tools") or []:
            if t.get("type") == "namespace":
                for f in t.get("tools") or t.get("functions") or []:
                    out.append({"name": f.get("name"), "parameters": f.get("parameters"),
                                "namespace": t.get("name")})
            elif t.get("name"):
                out.append({"name": t.get("name"), "parameters": t.get("parameters")})
        return out

    def response(self, req, n, status, output):
        return {"id": f"resp_scripted_{n}", "object": "response", "created_at": int(time.time()),
                "status": status, "model": req.get("model", "scripted"), "output": output,
                "usage": {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": 2}}

    def stream(self, req, n, item, deltas=()):
        # The item as it starts: its text and arguments arrive as deltas or
        # with its end, never twice (Codex adds them up).
        started = dict(item)
        if "arguments" in started:
            started["arguments"] = ""
        if "content" in started:
            started["content"] = []
        return [
            sse("response.created", {"type": "response.created",
                                      "response": self.response(req, n, "in_progress", [])}),
            sse("response.output_item.added", {"type": "response.output_item.added",
                                               "output_index": 0, "item": started}),
            *deltas,
            sse("response.output_item.done", {"type": "response.output_item.done",
                                              "output_index": 0, "item": item}),
            sse("response.completed", {"type": "response.completed",
                                       "response": self.response(req, n, "completed", [item])}),
        ]

    def call(self, req, tool, args, n):
        item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                "name": tool["name"], "arguments": args, "status": "completed"}
        if tool.get("namespace"):
            item["namespace"] = tool["namespace"]
        return self.stream(req, n, item)

    def say(self, req, text):
        item = {"type": "message", "id": "msg_scripted", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        delta = sse("response.output_text.delta", {"type": "response.output_text.delta",
                                                   "item_id": "msg_scripted", "output_index": 0,
                                                   "content_index": 0, "delta": text})
        return self.stream(req, 0, item, [delta])


def for_path(path: str):
    if path.endswith("/chat/completions"):
        return Chat()
    if path.endswith("/messages"):
        return Messages()
    if path.endswith("/responses"):
        return Responses()
    return None
