"""The agent v1 API's ``ATTACH_CONTAINER_OUTPUT`` (include/mesos/v1/agent/
agent.proto; docs/operator-http-api.md; ``Http::attachContainerOutput``,
src/slave/http.cpp, and the I/O switchboard that serves it,
src/slave/containerizer/mesos/io/switchboard.cpp): a running container's
stdout and stderr as a stream of ``ProcessIO`` records, RecordIO-framed
(docs/recordio.md), each ``{"type": "DATA", "data": {"type": "STDOUT" or
"STDERR", "data": <base64>}}``, a ``{"type": "CONTROL", "control": {"type":
"HEARTBEAT", ...}}`` every ``heartbeat_interval`` seconds (the switchboard's
``heartbeatLoop``, the agent's ``--http_heartbeat_interval``, 30 s), until
the container ends.

Checked as ``Http::api`` checks a call: ``Message-Content-Type`` must not
be set on a request that is not a stream (415); ``Accept`` must allow JSON,
protobuf or RecordIO and, for RecordIO, ``Message-Accept`` JSON or protobuf
(406; without ``Accept`` the answer is ``application/json``, as Mesos
answers a streaming call for backwards compatibility, its records RecordIO
all the same); ``validation::agent::call::validate`` (400); a container
that is not one of this agent's running executors' is a 404 ``Container
<id> cannot be found``. Records are JSON or protobuf as ``Message-Accept``
(RecordIO) or ``Accept`` asks (``proto.py``); the call itself may be
either too.

How this differs from Mesos: Mesos attaches through the container's I/O
switchboard, which a container has only when it was launched with a TTY
(or as a nested container session); any other container's attach fails
(500 ``I/O switchboard server was disabled for this container``). The
local agent has no switchboard: it streams from the sandbox's ``stdout``
and ``stderr`` files, where every container's output goes, following them
as they grow. As Mesos, what is streamed is what the container writes after
the call: the files are read from their size at the call on (a file that
appears later, from its start). Output is read from the files only as fast
as the client takes it, so nothing is buffered for a slow reader; one that
takes nothing for ``write_timeout`` seconds (a write blocked that long) is
dropped, its connection shut down, and one that hangs up is noticed at once.
"""

import base64
import os
import select
import stat
import time
from typing import Any, Callable, Optional

from . import agent_api, proto
from .endpoints import JSON_TYPE, Reply, negotiate
from .stream import frame

CALL = "ATTACH_CONTAINER_OUTPUT"
PROTOBUF_TYPE = proto.PROTOBUF_TYPE
PROCESS_IO = "mesos.v1.agent.ProcessIO"
RECORDIO_TYPE = agent_api.RECORDIO_TYPE
MESSAGE_ACCEPT = "Message-Accept"
MESSAGE_CONTENT_TYPE = "Message-Content-Type"
NAME_MAX = 255                    # common::validation::validateID
MAX_CONTAINER_ID_LENGTH = 242     # src/slave/validation.cpp
CHUNK = 64 * 1024                 # bytes of a file read into one DATA record at most
STREAMS = (("STDOUT", "stdout"), ("STDERR", "stderr"))

# Why ``OutputStream.pump`` returned.
ENDED = "ended"                   # the container ended and its output was all sent
CLIENT_GONE = "client-gone"       # the client hung up, or a write failed
DROPPED = "dropped"               # a write waited ``write_timeout`` for a client that read nothing


def _id_error(value: Any) -> Optional[str]:
    """``validation::container::validateContainerId`` of a ContainerID (JSON)."""
    if not isinstance(value, dict) or not isinstance(value.get("value"), str):
        return None            # reported as a conversion error (_check)
    text = value["value"]
    if not text:
        return "ID must not be empty"
    if len(text) > NAME_MAX:
        return "ID must not be greater than %d characters" % NAME_MAX
    if text in (".", ".."):
        return "'%s' is disallowed" % text
    if any(ord(c) < 32 or ord(c) == 127 or c in "/\\" for c in text):
        return "'%s' contains invalid characters" % text
    if len(text) > MAX_CONTAINER_ID_LENGTH:
        return ("'ContainerID.value' '%s' exceeds the maximum length (%d)"
                % (text, MAX_CONTAINER_ID_LENGTH))
    if any(c in ". " for c in text):
        return "'ContainerID.value' '%s' contains invalid characters" % text
    if "parent" in value:
        error = _id_error(value["parent"])
        if error is not None:
            return "'ContainerID.parent' is invalid: " + error
    return None


def _check(call: dict) -> Optional[str]:
    """The call's 400 message (conversion or ``validate``), or None."""
    request = call.get("attach_container_output")
    if request is None:
        return "Failed to validate agent::Call: Expecting 'attach_container_output' to be present"
    container = request.get("container_id") if isinstance(request, dict) else None
    if not _valid_shape(container):
        return ("Failed to convert JSON into Call protobuf: Missing required fields: "
                "attach_container_output.container_id")
    error = _id_error(container)
    if error is not None:
        return ("Failed to validate agent::Call: 'attach_container_output.container_id' is "
                "invalid: %s" % error)
    return None


def _valid_shape(container: Any) -> bool:
    """Whether ``container`` is a ContainerID (its parents too) as JSON."""
    if container is None:
        return False
    while container is not None:
        if not isinstance(container, dict) or not isinstance(container.get("value"), str):
            return False
        container = container.get("parent")
    return True


def _stringify(container: dict) -> str:
    """``stringify(ContainerID)``: ``parent.child``."""
    parent = container.get("parent")
    return (_stringify(parent) + "." if parent else "") + container["value"]


def _media_types(headers: Any) -> "tuple[Optional[Reply], str, Optional[str]]":
    """(a refusal or None, the answer's Content-Type, its Message-Content-Type),
    as ``Http::api`` reads the headers of a request that is not a stream."""
    if headers.get(MESSAGE_CONTENT_TYPE) is not None:
        return Reply(415, "Expecting '%s' to be not set for non-streaming requests"
                     % MESSAGE_CONTENT_TYPE), "", None
    answer = negotiate(headers.get("Accept"), agent_api.ANSWERS, agent_api.NOT_ACCEPTABLE)
    if isinstance(answer, Reply):
        return answer, "", None
    message_accept = headers.get(MESSAGE_ACCEPT)
    if answer != RECORDIO_TYPE:
        if message_accept is not None:
            return Reply(406, "Expecting '%s' to be not set for non-streaming responses"
                         % MESSAGE_ACCEPT), "", None
        return None, answer, None
    # acceptsMediaType: an absent header accepts anything.
    message_type = negotiate(message_accept, (JSON_TYPE, PROTOBUF_TYPE),
                             "Expecting '%s' to allow %s or %s"
                             % (MESSAGE_ACCEPT, JSON_TYPE, PROTOBUF_TYPE))
    if isinstance(message_type, Reply):
        return message_type, "", None
    return None, answer, message_type


def attach(master: Any, agent: Any, call: dict, headers: Any) -> "Reply | OutputStream":
    """The answer to an ``ATTACH_CONTAINER_OUTPUT`` call on ``agent``'s
    server (already authenticated): a refusal, or the ``OutputStream`` to
    pump."""
    refused, content_type, message_type = _media_types(headers)
    if refused is not None:
        return refused
    error = _check(call)
    if error is not None:
        return Reply(400, error)
    container = call["attach_container_output"]["container_id"]
    task = None
    if "parent" not in container:       # no nested containers here
        task = master.read(lambda _master, records: _running(agent, container["value"]))
    if task is None:
        return Reply(404, "Container %s cannot be found" % _stringify(container))
    return OutputStream(task.sandbox, content_type, message_type,
                        lambda: bool(task.terminal))


def _running(agent: Any, container_id: str) -> Any:
    """The task of ``agent`` whose container is ``container_id`` and runs
    (``Slave::getExecutor(containerId)``: live executors only), or None."""
    for task in agent.tasks.values():
        if task.container_id == container_id and not task.terminal and task.sandbox:
            return task
    return None


class OutputStream:
    """One client's ``ATTACH_CONTAINER_OUTPUT``: ``pump`` follows the
    sandbox's files and writes their new bytes as records until
    ``ended()`` and all is sent."""

    heartbeat_interval = 30.0        # the agent's --http_heartbeat_interval
    poll_min, poll_max = 0.02, 0.25  # how often idle files are looked at (backing off)

    def __init__(self, sandbox: str, content_type: str, message_type: Optional[str],
                 ended: Callable[[], bool]) -> None:
        self.sandbox = sandbox
        self.content_type = content_type
        self.message_type = message_type
        # Each record in the type asked for (RecordIO's Message-Accept, else
        # Accept's), written as JSON and re-encoded for protobuf.
        self.encode: Callable[[bytes], bytes] = (
            proto.frame_encoder(PROCESS_IO) if (message_type or content_type) == PROTOBUF_TYPE
            else bytes)
        self.ended = ended
        self._fds: dict[str, int] = {}
        self._offsets: dict[str, int] = {}
        for kind, name in STREAMS:       # what is there now was written before the call
            size = _size(os.path.join(sandbox, name))
            if size is not None:
                self._offsets[kind] = size

    @property
    def headers(self) -> "list[tuple[str, str]]":
        out = [("Content-Type", self.content_type)]
        if self.message_type is not None:
            out.append((MESSAGE_CONTENT_TYPE, self.message_type))
        return out

    def pump(self, write_chunk: Callable[[bytes], None], sock: Any) -> str:
        """Write records until the container ends (ENDED) or the client
        goes (CLIENT_GONE; DROPPED when a write timed out: the socket's
        timeout bounds each)."""
        try:
            return self._pump(write_chunk, sock)
        finally:
            self.close()

    def _pump(self, write_chunk: Callable[[bytes], None], sock: Any) -> str:
        beat = {"type": "CONTROL", "control": {"type": "HEARTBEAT", "heartbeat": {
            "interval": {"nanoseconds": int(self.heartbeat_interval * 1e9)}}}}
        next_beat = time.monotonic() + self.heartbeat_interval
        wait = self.poll_min
        while True:
            ended = self.ended()            # before the last read: nothing written after it
            sent = False
            try:
                for kind, name in STREAMS:
                    data = self._read(kind, name)
                    if data:
                        write_chunk(self.encode(frame({"type": "DATA", "data": {
                            "type": kind, "data": base64.b64encode(data).decode("ascii")}})))
                        sent = True
                if not sent and ended:
                    return ENDED
                if time.monotonic() >= next_beat:
                    write_chunk(self.encode(frame(beat)))
                    next_beat = time.monotonic() + self.heartbeat_interval
            except TimeoutError:
                return DROPPED
            except OSError:
                return CLIENT_GONE
            if sent:
                wait = self.poll_min
                continue
            if _hung_up(sock, min(wait, max(0.0, next_beat - time.monotonic()))):
                return CLIENT_GONE
            wait = min(wait * 2, self.poll_max)

    def _read(self, kind: str, name: str) -> bytes:
        """The next bytes (at most CHUNK) of the sandbox's file ``name``."""
        fd = self._fds.get(kind)
        if fd is None:
            fd = _open(self.sandbox, name)
            if fd is None:
                return b""
            self._fds[kind] = fd
        offset = self._offsets.get(kind, 0)
        size = os.fstat(fd).st_size
        if size < offset:                   # truncated: go on from its end
            offset = self._offsets[kind] = size
        if size == offset:
            return b""
        data = os.pread(fd, min(CHUNK, size - offset), offset)
        self._offsets[kind] = offset + len(data)
        return data

    def close(self) -> None:
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()


def _size(path: str) -> Optional[int]:
    try:
        return os.lstat(path).st_size
    except OSError:
        return None


def _open(sandbox: str, name: str) -> Optional[int]:
    """A descriptor of the regular file ``name`` in ``sandbox``, following
    no link (a task cannot make the agent read another file), or None."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
    try:
        directory = os.open(sandbox, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fd = os.open(name, flags, dir_fd=directory)
    except OSError:
        return None
    finally:
        os.close(directory)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _hung_up(sock: Any, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds; whether the client hung up meanwhile
    (what it sends is read and ignored)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    try:
        if not poller.poll(timeout * 1000.0):
            return False
        return not sock.recv(4096)
    except (BlockingIOError, InterruptedError, TimeoutError):
        return False
    except (OSError, ValueError):
        return True


__all__ = ["CALL", "ENDED", "CLIENT_GONE", "DROPPED", "OutputStream", "attach"]
