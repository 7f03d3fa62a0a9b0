"""Render values and gRPC errors the way the Go kubelet prints them, so error texts match byte for byte."""

from __future__ import annotations

from collections.abc import Iterable

import grpc

_SHORT_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}

# Go's codes.Code String() names; Python spells them in SCREAMING_SNAKE and says CANCELLED.
_GO_CODE_NAMES = {
    grpc.StatusCode.OK: "OK",
    grpc.StatusCode.CANCELLED: "Canceled",
    grpc.StatusCode.UNKNOWN: "Unknown",
    grpc.StatusCode.INVALID_ARGUMENT: "InvalidArgument",
    grpc.StatusCode.DEADLINE_EXCEEDED: "DeadlineExceeded",
    grpc.StatusCode.NOT_FOUND: "NotFound",
    grpc.StatusCode.ALREADY_EXISTS: "AlreadyExists",
    grpc.StatusCode.PERMISSION_DENIED: "PermissionDenied",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "ResourceExhausted",
    grpc.StatusCode.FAILED_PRECONDITION: "FailedPrecondition",
    grpc.StatusCode.ABORTED: "Aborted",
    grpc.StatusCode.OUT_OF_RANGE: "OutOfRange",
    grpc.StatusCode.UNIMPLEMENTED: "Unimplemented",
    grpc.StatusCode.INTERNAL: "Internal",
    grpc.StatusCode.UNAVAILABLE: "Unavailable",
    grpc.StatusCode.DATA_LOSS: "DataLoss",
    grpc.StatusCode.UNAUTHENTICATED: "Unauthenticated",
}


def go_quote(text: str) -> str:
    """Go's `%q` of a string (strconv.Quote): printable runes kept, the rest escaped."""
    out = ['"']
    for char in text:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        elif char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    out.append('"')
    return "".join(out)


def go_quote_list(items: Iterable[str]) -> str:
    """Go's `%q` of a []string: `["a" "b"]`."""
    return "[" + " ".join(go_quote(item) for item in items) + "]"


def go_code_name(code: grpc.StatusCode | None) -> str:
    """The Go name of a status code (`InvalidArgument`), `Unknown` when there is none."""
    if code is None:
        return "Unknown"
    return _GO_CODE_NAMES.get(code, "Unknown")


def go_status_text(error: grpc.RpcError) -> str:
    """What Go's `err.Error()` says for a gRPC status error: `rpc error: code = X desc = Y`."""
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    return f"rpc error: code = {go_code_name(code)} desc = {details or ''}"
