"""Read the reason of a toolwire gRPC error.

Every status toolsvc and the orchestrator return carries a google.rpc.Status
in the trailing metadata "grpc-status-details-bin", whose details hold a
google.rpc.ErrorInfo with domain "toolwire.dev", a stable reason such as
SESSION_NOT_FOUND, and metadata such as the session id (docs/protocol.md
lists them all). Decide by the reason, never by the status message.

Debian's python3-grpcio has no grpc_status module, so the Status is decoded
here with the classes in gen/python/google/rpc (made by scripts/gen).

    try:
        stub.GetSession(...)
    except grpc.RpcError as err:
        if reason(err) == SESSION_NOT_FOUND:
            ...
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_GEN = os.environ.get("TOOLWIRE_PYTHON_GEN") or os.path.join(_HERE, os.pardir, os.pardir, "gen", "python")
if _GEN not in sys.path:
    sys.path.insert(0, _GEN)

from google.rpc import error_details_pb2  # noqa: E402
from google.rpc import status_pb2  # noqa: E402

DOMAIN = "toolwire.dev"
DETAILS_KEY = "grpc-status-details-bin"

# The reasons the examples decide by; docs/protocol.md has the full list.
SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
SESSION_EXISTS = "SESSION_EXISTS"
SESSION_CLOSED = "SESSION_CLOSED"
DRAINING = "DRAINING"
TOKEN_MISSING = "TOKEN_MISSING"
TOKEN_INVALID = "TOKEN_INVALID"


def error_info(err):
    """Returns the toolwire ErrorInfo of a grpc.RpcError, or None.

    None means the status came from gRPC itself (a broken connection, a
    deadline, an unknown method): only its code says what happened.
    """
    trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for key, value in trailers or ():
        if key != DETAILS_KEY:
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Is(info.DESCRIPTOR) and detail.Unpack(info) and info.domain == DOMAIN:
                return info
    return None


def reason(err):
    """Returns the reason of a grpc.RpcError, or "" when it has none."""
    info = error_info(err)
    return info.reason if info is not None else ""


def metadata(err):
    """Returns the ErrorInfo metadata of a grpc.RpcError as a dict."""
    info = error_info(err)
    return dict(info.metadata) if info is not None else {}


def describe(err):
    """Returns "CODE REASON: message" for logs."""
    r = reason(err)
    return f"{err.code().name}{' ' + r if r else ''}: {err.details()}"
