"""The one exception of the kiln package, for the runtime and the client alike."""
from __future__ import annotations

import enum


class StatusCode(enum.IntEnum):
    """Canonical status codes: the runtime's kiln_status_t and gRPC's codes share these numbers."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16

    @classmethod
    def of(cls, value: int) -> "StatusCode":
        """The code numbered `value`; UNKNOWN for a number outside the canonical set."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class KilnError(Exception):
    """A failed runtime call or RPC: `code` (a StatusCode) and `message` (the reason, with context).

    str(error) is "CODE: message", e.g. "DATA_LOSS: package checksum mismatch".
    """

    def __init__(self, code: StatusCode | int, message: str) -> None:
        self.code = StatusCode.of(int(code))
        self.message = message
        super().__init__(f"{self.code.name}: {message}")
