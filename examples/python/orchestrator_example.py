#!/usr/bin/env python3
"""Hold a conversation through the toolwire orchestrator from Python.

Gets the session named by --session, or creates it when the orchestrator
answers SESSION_NOT_FOUND (and gets it after all when a CreateSession that
raced with another client's answers SESSION_EXISTS): the decision is made by
the reason in the error's google.rpc.ErrorInfo, never by its message. Then
it attaches a Converse stream, sends the prompt as a user message, answers
every permission request with "allow once", and prints the turn's events as
JSON lines until the turn is complete. With --require-sandbox, a new session
is refused unless its executor enforces those protections (the error's reason
is SANDBOX_REQUIREMENT_UNMET, its metadata "missing" says what lacks); the
session event shows what confines the tools (the executor's Hello).

    /usr/bin/python3 orchestrator_example.py 127.0.0.1:7071 "Create hello.txt"
    /usr/bin/python3 orchestrator_example.py unix:///tmp/orchestrator.sock \
        --session my-session "And now read it back"
    /usr/bin/python3 orchestrator_example.py 127.0.0.1:7071 --session confined \
        --require-sandbox landlock,network:none "Create hello.txt"

Needs grpcio and protobuf (Debian: python3-grpcio, python3-protobuf) and the
stubs in gen/python of this repository (found relative to this file, or set
TOOLWIRE_PYTHON_GEN).
"""

import argparse
import json
import os
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
from toolwire_errors import SESSION_EXISTS, SESSION_NOT_FOUND  # noqa: E402
from toolwire.executor.v1 import executor_pb2 as ex  # noqa: E402
from toolwire.orchestrator.v1 import orchestrator_pb2 as pb  # noqa: E402
from toolwire.orchestrator.v1 import orchestrator_pb2_grpc as pb_grpc  # noqa: E402


class ConversationError(Exception):
    """The conversation could not go on."""


def emit(**fields):
    print(json.dumps(fields, sort_keys=True), flush=True)


def get_or_create(stub, session_id, config, deadline_s):
    """Returns (session, created), deciding by the error's reason."""
    try:
        return stub.GetSession(pb.GetSessionRequest(session_id=session_id), timeout=deadline_s).session, False
    except grpc.RpcError as err:
        if toolwire_errors.reason(err) != SESSION_NOT_FOUND:
            raise
    try:
        resp = stub.CreateSession(pb.CreateSessionRequest(session_id=session_id, config=config), timeout=deadline_s)
        return resp.session, True
    except grpc.RpcError as err:
        if toolwire_errors.reason(err) != SESSION_EXISTS:
            raise
    # Another client created it between the two calls.
    return stub.GetSession(pb.GetSessionRequest(session_id=session_id), timeout=deadline_s).session, False


def result_text(result):
    return "".join(b.text.text for b in result.content if b.WhichOneof("block") == "text")


class Conversation:
    """One Converse stream: a request queue feeding gRPC, a reader thread."""

    def __init__(self, stub, deadline_s):
        self._requests = queue.Queue()
        self.events = queue.Queue()
        self._call = stub.Converse(self._iter(), timeout=deadline_s)
        threading.Thread(target=self._read, daemon=True).start()

    def _iter(self):
        while True:
            msg = self._requests.get()
            if msg is None:
                return
            yield msg

    def _read(self):
        try:
            for resp in self._call:
                self.events.put(resp)
            self.events.put(None)
        except grpc.RpcError as err:
            self.events.put(err)

    def send(self, **fields):
        self._requests.put(pb.ConverseRequest(**fields))

    def close_send(self):
        self._requests.put(None)

    def next(self, timeout_s):
        ev = self.events.get(timeout=timeout_s)
        if isinstance(ev, grpc.RpcError):
            raise ev
        if ev is None:
            raise ConversationError("the orchestrator ended the stream")
        return ev


def converse(stub, session_id, prompt, deadline_s):
    """Runs one turn on session_id and returns once it is complete."""
    end = time.monotonic() + deadline_s

    def remaining():
        return max(0.0, end - time.monotonic())

    conv = Conversation(stub, deadline_s)
    conv.send(attach=pb.Attach(session_id=session_id))
    first = conv.next(remaining())
    if first.WhichOneof("event") != "attached":
        raise ConversationError(f"first event is {first.WhichOneof('event')}, not attached")
    conv.send(user_message=pb.UserMessage(text=prompt))
    text = []
    while True:
        ev = conv.next(remaining())
        kind = ev.WhichOneof("event")
        if kind == "text_delta":
            text.append(ev.text_delta.text)
        elif kind == "tool_use":
            emit(event="tool_use", id=ev.tool_use.id, name=ev.tool_use.name)
        elif kind == "permission_request":
            req = ev.permission_request
            emit(event="permission_request", tool_use_id=req.tool_use_id, tool_name=req.tool_name, answer="allow_once")
            conv.send(permission_decision=ex.PermissionDecision(
                tool_use_id=req.tool_use_id, behavior=ex.PERMISSION_BEHAVIOR_ALLOW_ONCE))
        elif kind == "tool_result":
            r = ev.tool_result
            emit(event="tool_result", tool_use_id=r.tool_use_id, is_error=r.is_error, content=result_text(r))
        elif kind == "error":
            # Refusals inside the stream are events: a user message during
            # a turn comes back with reason SESSION_BUSY, and the turn goes
            # on. Decide by the reason (empty when none fits), not the text.
            emit(event="error", kind=ev.error.kind, reason=ev.error.reason, message=ev.error.message,
                 recoverable=ev.error.recoverable)
        elif kind == "turn_complete":
            tc = ev.turn_complete
            emit(event="turn_complete", stop_reason=pb.StopReason.Name(tc.stop_reason), text=tc.text or "".join(text))
            break
    conv.close_send()
    # After the half-close the orchestrator ends the stream: the turn is
    # over and every event was sent.
    try:
        while True:
            conv.next(min(remaining(), 10.0))
    except ConversationError:
        pass


def sandbox_fields(session):
    """What confines the session's tools, from its executor's Hello (empty
    until the session connected to its executor)."""
    if not session.HasField("sandbox"):
        return {}
    sb = session.sandbox
    return {"sandbox_backend": sb.backend, "sandbox_network": sb.network,
            "sandbox_enforced": [ex.Protection.Name(p) for p in sb.enforced]}


def run(address, session_id, prompt, deadline_s, require_sandbox=()):
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.OrchestratorServiceStub(channel)
        # Default mode: the executor asks before writing, and this client
        # answers. require_sandbox applies to a session this creates.
        config = pb.SessionConfig(settings=ex.Settings(mode=ex.PERMISSION_MODE_DEFAULT),
                                  require_sandbox=list(require_sandbox))
        session, created = get_or_create(stub, session_id, config, deadline_s)
        emit(event="session", id=session.id, created=created, turns=session.turns, **sandbox_fields(session))
        converse(stub, session.id, prompt, deadline_s)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address", help="orchestrator address: unix:///path/to.sock or host:port")
    parser.add_argument("prompt", help="the user message")
    parser.add_argument("--session", default="python-example", help="session id to use or create")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds the turn may take (default 60)")
    parser.add_argument("--require-sandbox", default="",
                        help='protections a new session\'s executor must enforce, e.g. "landlock,network:none"')
    args = parser.parse_args(argv)
    require = [w.strip() for w in args.require_sandbox.split(",") if w.strip()]
    try:
        return run(args.address, args.session, args.prompt, args.deadline, require)
    except grpc.RpcError as err:
        print(f"rpc failed: {toolwire_errors.describe(err)}", file=sys.stderr)
    except ConversationError as err:
        print(f"conversation failed: {err}", file=sys.stderr)
    except queue.Empty:
        print("timed out waiting for the orchestrator", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
