#!/usr/bin/env python3
"""Provoke every refusal of a toolwire service and print its reason.

For each case it makes a call the service must refuse and prints one JSON
line: the case, the status code, and the reason and metadata of the
google.rpc.ErrorInfo read from the trailing metadata (see toolwire_errors).
It shows that a client in another language gets the same stable reasons a
Go client does; examples/python's Go tests check the lines.

    /usr/bin/python3 toolwire_reasons.py executor unix:///tmp/toolsvc.sock \
        [--guarded unix:///tmp/toolsvc-with-token.sock]
    /usr/bin/python3 toolwire_reasons.py orchestrator 127.0.0.1:7071

--guarded names a toolsvc that wants a bearer token, for the
authentication cases.
"""

import argparse
import json
import os
import queue
import sys
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(
    0,
    os.environ.get("TOOLWIRE_PYTHON_GEN")
    or os.path.join(_HERE, os.pardir, os.pardir, "gen", "python"),
)

import grpc  # noqa: E402

import toolwire_errors  # noqa: E402
from toolwire.executor.v1 import executor_pb2 as ex  # noqa: E402
from toolwire.executor.v1 import executor_pb2_grpc as ex_grpc  # noqa: E402
from toolwire.orchestrator.v1 import orchestrator_pb2 as orch  # noqa: E402
from toolwire.orchestrator.v1 import orchestrator_pb2_grpc as orch_grpc  # noqa: E402

DEADLINE_S = 30.0


class Stream:
    """A bidirectional stream whose requests are sent one by one and whose
    responses are read on a thread until the stream ends."""

    def __init__(self, method):
        self._requests = queue.Queue()
        self.responses = queue.Queue()
        self._call = method(self._iter(), timeout=DEADLINE_S)
        self.error = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _iter(self):
        while True:
            msg = self._requests.get()
            if msg is None:
                return
            yield msg

    def _read(self):
        try:
            for resp in self._call:
                self.responses.put(resp)
        except grpc.RpcError as err:
            self.error = err
        self.responses.put(None)

    def send(self, msg):
        self._requests.put(msg)

    def close_send(self):
        self._requests.put(None)

    def next(self):
        """Returns the next response, or None once the stream ended."""
        return self.responses.get(timeout=DEADLINE_S)

    def end(self):
        """Waits for the end of the stream and returns its error, if any."""
        while self.next() is not None:
            pass
        return self.error

    def cancel(self):
        self._call.cancel()
        self._reader.join(timeout=5)


def report(case, err):
    """Prints the outcome of one case as a JSON line."""
    line = {"case": case}
    if err is None:
        line["code"] = "OK"
    else:
        line["code"] = err.code().name
        line["reason"] = toolwire_errors.reason(err)
        line["metadata"] = toolwire_errors.metadata(err)
    print(json.dumps(line, sort_keys=True), flush=True)


def stream_error(method, *msgs):
    """Sends msgs on a new stream and returns the error it ends with."""
    s = Stream(method)
    for m in msgs:
        s.send(m)
    err = s.end()
    s.close_send()
    s.cancel()
    return err


def unary_error(call, request, **kwargs):
    try:
        call(request, timeout=DEADLINE_S, **kwargs)
    except grpc.RpcError as err:
        return err
    return None


def executor_cases(address, guarded):
    def opening(**fields):
        return ex.ExecuteRequest(open=ex.Open(**fields))

    def resuming(session_id):
        return ex.ExecuteRequest(resume=ex.Resume(session_id=session_id))

    tool_use = ex.ExecuteRequest(tool_use=ex.ToolUse(
        id="toolu_py", name="Bash", input_json="{}", assistant_message_id="msg_py"))

    with grpc.insecure_channel(address) as channel:
        stub = ex_grpc.ExecutorServiceStub(channel)
        execute = stub.Execute
        report("tool_use first", stream_error(execute, tool_use))
        report("resume of an unknown session", stream_error(execute, resuming("py-nope")))
        report("workspace outside the root", stream_error(execute, opening(session_id="py-ws", workspace="/etc")))
        report("rule that does not compile", stream_error(
            execute, opening(settings=ex.Settings(allow=["Bash("]))))
        report("second open", stream_error(execute, opening(session_id="py-twice"), opening()))
        report("tool_use without id", stream_error(execute, opening(session_id="py-noid"), ex.ExecuteRequest(
            tool_use=ex.ToolUse(name="Bash", input_json="{}"))))

        # A live session: opening it again is refused, and resuming it from
        # another stream ends this one.
        live = Stream(execute)
        live.send(opening(session_id="py-live"))
        hello = live.next()
        if hello is None or hello.WhichOneof("event") != "hello":
            raise SystemExit(f"no hello for py-live: {live.error}")
        report("open of a live session", stream_error(execute, opening(session_id="py-live")))
        resumed = Stream(execute)
        resumed.send(resuming("py-live"))
        if resumed.next() is None:
            raise SystemExit(f"resume of py-live failed: {resumed.error}")
        report("stream of a resumed session", live.end())
        live.close_send()
        live.cancel()
        resumed.close_send()
        resumed.end()
        resumed.cancel()

    if guarded:
        with grpc.insecure_channel(guarded) as channel:
            stub = ex_grpc.ExecutorServiceStub(channel)
            report("no token", unary_error(stub.ListTools, ex.ListToolsRequest()))
            report("wrong token", unary_error(stub.ListTools, ex.ListToolsRequest(),
                                              metadata=[("authorization", "Bearer not-the-token")]))


def orchestrator_cases(address):
    with grpc.insecure_channel(address) as channel:
        stub = orch_grpc.OrchestratorServiceStub(channel)
        report("get an unknown session", unary_error(stub.GetSession, orch.GetSessionRequest(session_id="py-nope")))
        report("get a malformed id", unary_error(stub.GetSession, orch.GetSessionRequest(session_id="../x")))
        report("delete an unknown session", unary_error(
            stub.DeleteSession, orch.DeleteSessionRequest(session_id="py-nope")))
        report("create with a bad configuration", unary_error(stub.CreateSession, orch.CreateSessionRequest(
            config=orch.SessionConfig(max_tokens=100, thinking_budget_tokens=200))))
        report("create with a workspace outside the root", unary_error(stub.CreateSession, orch.CreateSessionRequest(
            session_id="py-ws", config=orch.SessionConfig(workspace="/etc"))))
        report("create on an unreachable executor", unary_error(stub.CreateSession, orch.CreateSessionRequest(
            session_id="py-down", config=orch.SessionConfig(executor="127.0.0.1:1"))))
        report("create requiring a sandbox the executor lacks", unary_error(stub.CreateSession, orch.CreateSessionRequest(
            session_id="py-sandbox", config=orch.SessionConfig(require_sandbox=["backend:gvisor"]))))

        created = stub.CreateSession(orch.CreateSessionRequest(session_id="py-reasons"), timeout=DEADLINE_S)
        sid = created.session.id
        report("create an existing session", unary_error(
            stub.CreateSession, orch.CreateSessionRequest(session_id=sid)))

        def attach(session_id):
            return orch.ConverseRequest(attach=orch.Attach(session_id=session_id))

        converse = stub.Converse
        report("user message first", stream_error(
            converse, orch.ConverseRequest(user_message=orch.UserMessage(text="hi"))))
        report("attach to an unknown session", stream_error(converse, attach("py-nope")))
        report("second attach", stream_error(converse, attach(sid), attach(sid)))

        # A session deleted while a stream is attached ends that stream.
        s = Stream(converse)
        s.send(attach(sid))
        first = s.next()
        if first is None or first.WhichOneof("event") != "attached":
            raise SystemExit(f"attach to {sid} failed: {s.error}")
        stub.DeleteSession(orch.DeleteSessionRequest(session_id=sid), timeout=DEADLINE_S)
        report("stream of a deleted session", s.end())
        s.close_send()
        s.cancel()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("service", choices=["executor", "orchestrator"])
    parser.add_argument("address", help="unix:///path/to.sock or host:port")
    parser.add_argument("--guarded", help="a toolsvc that wants a bearer token (executor only)")
    args = parser.parse_args(argv)
    if args.service == "executor":
        executor_cases(args.address, args.guarded)
    else:
        orchestrator_cases(args.address)
    return 0


if __name__ == "__main__":
    sys.exit(main())
