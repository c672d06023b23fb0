"""The local master's exceptions: ``LocalMasterError`` for its users,
``CallError`` for the HTTP layer (a refused scheduler call)."""

from ...exceptions import MesosError


class LocalMasterError(MesosError):
    """The local master cannot start (e.g. its port is taken) or was misused."""


class CallError(Exception):
    """A scheduler call refused with an HTTP status and a plain-text message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


__all__ = ["LocalMasterError", "CallError"]
