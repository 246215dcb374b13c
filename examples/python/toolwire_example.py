#!/usr/bin/env python3
"""Drive a toolwire executor (toolsvc) from Python.

Lists the executor's tools, then opens one Execute stream and sends a batch
of tool calls the way a model client would: every tool_use of one assistant
message, without waiting for results in between. Prints each Result as an
Anthropic tool_result block, one JSON object per line, and exits 0 once every
call has exactly one result.

    /usr/bin/python3 toolwire_example.py unix:///tmp/toolsvc.sock
    /usr/bin/python3 toolwire_example.py 127.0.0.1:7070
    /usr/bin/python3 toolwire_example.py unix:///tmp/toolsvc.sock --mcp-command /srv/bin/example-mcp

Needs grpcio and protobuf (Debian: python3-grpcio, python3-protobuf) and the
stubs in gen/python of this repository (found relative to this file, or set
TOOLWIRE_PYTHON_GEN).
"""

import argparse
import json
import os
import posixpath
import queue
import sys
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(
    0,
    os.environ.get("TOOLWIRE_PYTHON_GEN")
    or os.path.join(_HERE, os.pardir, os.pardir, "gen", "python"),
)

import grpc  # noqa: E402

import toolwire_errors  # noqa: E402
from toolwire.executor.v1 import executor_pb2 as pb  # noqa: E402
from toolwire.executor.v1 import executor_pb2_grpc as pb_grpc  # noqa: E402

# The largest message toolsvc takes in (and sends): a ToolUse past it cannot
# be sent, and sending it anyway would end the stream for every call.
MAX_MESSAGE_BYTES = 16 << 20

CLIENT_NAME = "toolwire-python-example"
CLIENT_VERSION = "0.1.0"
ASSISTANT_MESSAGE_ID = "msg_python_example_1"


class ProtocolError(Exception):
    """The executor broke a rule of the Execute stream."""


class _StreamEnd:
    """Marks the end of the response stream; error is None on a clean end."""

    def __init__(self, error):
        self.error = error


def build_batch(workspace, mcp_tools=()):
    """Returns the (id, tool name, input) triples of one assistant message.

    File tools want absolute paths on the executor's side, so they are built
    from the session workspace that Hello reports. With the example MCP
    server's tools in the session (mcp_tools, from Hello), two MCP calls
    come too.
    """
    path = posixpath.join(workspace, "hello.txt")
    batch = [
        ("toolu_py_01_write", "Write", {"file_path": path, "content": "hello from python\n"}),
        ("toolu_py_02_read", "Read", {"file_path": path}),
        ("toolu_py_03_glob", "Glob", {"pattern": "*.txt"}),
        ("toolu_py_04_bash", "Bash", {"command": "echo hi", "description": "Print hi"}),
        # Read without its required file_path: the executor answers with an
        # is_error result, never with an RPC error.
        ("toolu_py_05_bad", "Read", {"limit": 5}),
        # More than one message may carry: the client answers it itself
        # (see unsendable_result), and the other calls go on.
        ("toolu_py_08_big", "Write", {"file_path": posixpath.join(workspace, "big.txt"),
                                      "content": "x" * (MAX_MESSAGE_BYTES + 1)}),
    ]
    if MCP_ECHO in mcp_tools:
        batch.append(("toolu_py_06_mcp_echo", MCP_ECHO, {"text": "hi from mcp"}))
    if MCP_SLOW in mcp_tools:
        batch.append(("toolu_py_07_mcp_slow", MCP_SLOW, {"steps": 2, "delay_ms": 50}))
    return batch


# The example MCP server's tools as the session names them, when it is
# configured as server "example" (--mcp-command).
MCP_ECHO = "mcp__example__echo"
MCP_SLOW = "mcp__example__slow"


def mcp_servers(command):
    """Returns Open.mcp_servers with the example MCP server, or nothing."""
    if not command:
        return {}
    # The same shape as Claude Code's {"mcpServers": {"example": {"command": ...}}}.
    return {"example": pb.McpServerConfig(command=command)}


def unsendable_result(request):
    """Returns the tool_result block of a ToolUse request that is too large
    to send, or None. The executor would refuse the message and end the
    stream, so the call gets an is_error result here, worded as the
    executor words input errors."""
    size = request.ByteSize()
    if size <= MAX_MESSAGE_BYTES:
        return None
    use = request.tool_use
    text = (f"<tool_use_error>InputValidationError: {use.name} was called with input too large "
            f"to send to the executor: the message would be {size} bytes, and one may carry at "
            f"most {MAX_MESSAGE_BYTES}, so the call was not run. Send the call again with less: "
            "write a large file in parts (Write, then Bash with >> or Edit), or produce large "
            "content with a command.</tool_use_error>")
    return {"type": "tool_result", "tool_use_id": use.id, "content": text, "is_error": True}


def tool_result_block(result):
    """Converts a Result into an Anthropic tool_result content block."""
    content = []
    for block in result.content:
        kind = block.WhichOneof("block")
        if kind == "text":
            content.append({"type": "text", "text": block.text.text})
        elif kind == "image":
            content.append(
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": block.image.media_type,
                        "data": block.image.data_base64,
                    },
                }
            )
    out = {"type": "tool_result", "tool_use_id": result.tool_use_id}
    # Claude Code sends a lone text block as a plain string.
    if len(content) == 1 and content[0]["type"] == "text":
        out["content"] = content[0]["text"]
    else:
        out["content"] = content
    if result.HasField("is_error"):
        out["is_error"] = result.is_error
    return out


class Session:
    """One Execute stream: a request queue feeding gRPC and a reader thread."""

    def __init__(self, stub, deadline_s):
        self._requests = queue.Queue()
        self.events = queue.Queue()
        self._call = stub.Execute(self._request_iter(), timeout=deadline_s)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._last_sequence = 0

    def _request_iter(self):
        while True:
            msg = self._requests.get()
            if msg is None:  # half-close: the client sends nothing more
                return
            yield msg

    def _read(self):
        try:
            for resp in self._call:
                self.events.put(resp)
            self.events.put(_StreamEnd(None))
        except grpc.RpcError as err:
            self.events.put(_StreamEnd(err))

    def send(self, **fields):
        self.send_request(pb.ExecuteRequest(**fields))

    def send_request(self, request):
        self._requests.put(request)

    def close_send(self):
        self._requests.put(None)

    def cancel(self):
        self._call.cancel()
        self._reader.join(timeout=5)

    def next_event(self, timeout_s):
        """Returns the next response or _StreamEnd; checks the sequence rule."""
        ev = self.events.get(timeout=timeout_s)
        if isinstance(ev, pb.ExecuteResponse):
            if ev.sequence <= self._last_sequence:
                raise ProtocolError(
                    f"sequence went from {self._last_sequence} to {ev.sequence}"
                )
            self._last_sequence = ev.sequence
        return ev


def run(address, deadline_s, verbose, mcp_command=None):
    """Runs the example against address; returns the process exit status."""
    def log(msg):
        if verbose:
            print(msg, file=sys.stderr)

    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.ExecutorServiceStub(channel)

        # wait_for_ready: a server started a moment ago may not listen yet.
        tools = stub.ListTools(pb.ListToolsRequest(), timeout=deadline_s, wait_for_ready=True)
        print("tools: " + ", ".join(t.name for t in tools.tools))

        session = Session(stub, deadline_s)
        end = time.monotonic() + deadline_s

        def remaining():
            return max(0.0, end - time.monotonic())

        session.send(
            open=pb.Open(
                client_name=CLIENT_NAME,
                client_version=CLIENT_VERSION,
                options=pb.SessionOptions(result_order=pb.RESULT_ORDER_TOOL_USE),
                mcp_servers=mcp_servers(mcp_command),
            )
        )
        first = session.next_event(remaining())
        if isinstance(first, _StreamEnd):
            raise ProtocolError(f"stream ended before Hello: {first.error}")
        if first.WhichOneof("event") != "hello":
            raise ProtocolError(f"first event is {first.WhichOneof('event')}, not hello")
        hello = first.hello
        log(f"session {hello.session_id} on executor {hello.executor_version}, "
            f"workspace {hello.workspace}, sandbox {hello.sandbox.backend}")

        # Hello lists the session's MCP servers and their tools; a model
        # client offers those tools after the built-in ones.
        for server in hello.mcp_servers:
            state = pb.McpServerState.Name(server.state).removeprefix("MCP_SERVER_STATE_").lower()
            print(f"mcp server {server.name}: {state}" + (f" ({server.error})" if server.error else ""))
        mcp_tools = [t.name for t in hello.mcp_tools]
        if mcp_tools:
            print("mcp tools: " + ", ".join(mcp_tools))

        batch = build_batch(hello.workspace, mcp_tools)
        pending = {tool_use_id for tool_use_id, _, _ in batch}
        seen = set()
        for tool_use_id, name, tool_input in batch:
            request = pb.ExecuteRequest(
                tool_use=pb.ToolUse(
                    id=tool_use_id,
                    name=name,
                    input_json=json.dumps(tool_input),
                    assistant_message_id=ASSISTANT_MESSAGE_ID,
                )
            )
            local = unsendable_result(request)
            if local is not None:
                log(f"{tool_use_id} is too large to send: answered here")
                seen.add(tool_use_id)
                pending.discard(tool_use_id)
                print(json.dumps(local), flush=True)
                continue
            session.send_request(request)

        def handle(ev):
            kind = ev.WhichOneof("event")
            if kind == "result":
                rid = ev.result.tool_use_id
                if rid in seen:
                    raise ProtocolError(f"second result for {rid}")
                if rid not in pending:
                    raise ProtocolError(f"result for unknown tool_use {rid}")
                seen.add(rid)
                pending.discard(rid)
                print(json.dumps(tool_result_block(ev.result)), flush=True)
            elif kind == "permission_request":
                req = ev.permission_request
                log(f"permission asked for {req.tool_use_id} ({req.reason}): allowing once")
                session.send(
                    permission_decision=pb.PermissionDecision(
                        tool_use_id=req.tool_use_id,
                        behavior=pb.PERMISSION_BEHAVIOR_ALLOW_ONCE,
                    )
                )
            elif kind == "progress":
                log(f"progress {ev.progress.tool_use_id}: {ev.progress.output!r}")
                if ev.progress.tool_use_id.startswith("toolu_py_07"):
                    print(f"progress {ev.progress.tool_use_id}: {ev.progress.output.decode().strip()}", flush=True)
            elif kind == "mcp_tools_changed":
                log("mcp tools now: " + ", ".join(t.name for t in ev.mcp_tools_changed.tools))
            else:
                log(f"#{ev.sequence} {kind}")

        while pending:
            ev = session.next_event(remaining())
            if isinstance(ev, _StreamEnd):
                raise ProtocolError(f"stream ended with results missing for {sorted(pending)}: {ev.error}")
            handle(ev)

        # Every call has its result. Half-close and read what is left, so a
        # second result for any call would still be caught.
        session.close_send()
        try:
            while True:
                ev = session.next_event(min(remaining(), 5.0))
                if isinstance(ev, _StreamEnd):
                    if ev.error is not None:
                        raise ProtocolError(f"stream ended with {toolwire_errors.describe(ev.error)}")
                    break
                handle(ev)
        except queue.Empty:
            log("executor kept the stream open after half-close; cancelling")
        session.cancel()
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address", help="toolsvc address: unix:///path/to.sock or host:port")
    parser.add_argument("--deadline", type=float, default=60.0,
                        help="seconds the whole run may take (default 60)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log stream events to stderr")
    parser.add_argument("--mcp-command",
                        help="path (on the executor) of the example MCP server, "
                             "examples/mcp/server, to add as the session's server \"example\"")
    args = parser.parse_args(argv)
    try:
        return run(args.address, args.deadline, args.verbose, args.mcp_command)
    except ProtocolError as err:
        print(f"protocol error: {err}", file=sys.stderr)
    except grpc.RpcError as err:
        # The reason (docs/protocol.md) says what happened, e.g. TOKEN_MISSING
        # or DRAINING; the message is for people.
        print(f"rpc failed: {toolwire_errors.describe(err)}", file=sys.stderr)
    except queue.Empty:
        print("timed out waiting for the executor", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
