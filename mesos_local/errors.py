"""The embedded master's exceptions, one tree of its own (it imports nothing
of the frameworks that use it)::

    LocalMasterError                the master cannot start, or was misused
    ├── AgentSpecError              an impossible agent (a ValueError too)
    ├── CredentialsError            unusable credentials (a ValueError too)
    └── DockerEngineError           the Docker engine or an image is unavailable
    CallError                       a refused scheduler call (the HTTP layer)
"""


class LocalMasterError(Exception):
    """The local master cannot start (e.g. its port is taken) or was misused."""


class AgentSpecError(LocalMasterError, ValueError):
    """An AgentSpec with impossible values."""


class CredentialsError(LocalMasterError, ValueError):
    """Credentials that cannot be used (the message names the fix)."""


class DockerEngineError(LocalMasterError):
    """The Docker engine or an image is not available, or a container cannot
    be removed."""


class CallError(Exception):
    """A scheduler call refused with an HTTP status and a plain-text message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


__all__ = ["LocalMasterError", "AgentSpecError", "CredentialsError", "DockerEngineError",
           "CallError"]
