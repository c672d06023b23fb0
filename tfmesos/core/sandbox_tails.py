"""The last lines a task wrote in its Mesos sandbox, for a task that ended
before it reached the rendezvous: what it printed there (an interpreter
that is missing, tfmesos that cannot be imported, a fetch that failed) is
in its sandbox's ``stdout`` and ``stderr`` only, which tfrun reads through
the agent's ``/files`` endpoints at the ``Offer.url`` of its launch
(``mesos.agent_files``). Real Mesos agents and the embedded master serve
them alike.

Reading never fails the run nor holds it: the whole read is bounded by
``TIMEOUT``; any error gives no tail and one log line, and an agent that
did not answer is not asked again in this run.
"""

import logging
import threading
from typing import TYPE_CHECKING, Callable, Optional

from ..mesos.agent_files import AgentFilesError, agent_base_url, read_tails, sandbox_path
from ..mesos.http_transport import TLSContext, basic_auth

if TYPE_CHECKING:
    from .scheduler import Launch

logger = logging.getLogger(__name__)

TAIL_LINES = 20          # of each file
TAIL_BYTES = 8 * 1024    # read from each file's end
TIMEOUT = 2.0            # seconds for all of one task's reads
STREAMS = ("stdout", "stderr")

# ``agent_files.read_tails``: (base URL, sandbox path, file names, bytes,
# lines, timeout, Authorization header or None, TLS) -> {name: [line, ...]}
ReadTails = Callable[[str, str, tuple[str, ...], int, int, float, Optional[str], TLSContext],
                     dict[str, list[str]]]


class SandboxTails:
    """The sandbox tails of a run's tasks. ``framework_id()``: the run's
    framework id (None before it registered); ``credentials()``:
    (principal, secret) or None, sent to the agents (the embedded master's
    own, which its ``/files`` asks for); ``master_url()``: the master's URL:
    where it speaks https, so do its agents (``tls``: (verify, ca_bundle),
    as for the master); ``read``: ``read_tails`` (tests replace it)."""

    def __init__(self, framework_id: Callable[[], Optional[str]],
                 credentials: Callable[[], Optional[tuple[str, str]]] = lambda: None,
                 master_url: Callable[[], Optional[str]] = lambda: None,
                 tls: tuple[bool, Optional[str]] = (True, None), read: ReadTails = read_tails,
                 timeout: float = TIMEOUT) -> None:
        self._framework_id = framework_id
        self._credentials = credentials
        self._master_url = master_url
        self._tls = TLSContext(*tls)
        self._read = read
        self._timeout = timeout
        self._lock = threading.Lock()
        # task id -> its agent's base URL (None: unknown)
        self._agents: dict[str, Optional[str]] = {}
        self._silent: set[str] = set()       # agents that did not answer

    def launched(self, launch: "Launch") -> None:
        """A ``scheduler.Launch`` goes to Mesos: where its agent serves
        ``/files`` (the driver's thread)."""
        https = str(self._master_url() or "").startswith("https://")
        url = agent_base_url(launch.assignment.agent_url, "https" if https else None)
        with self._lock:
            self._agents[launch.task_id] = url

    def read(self, task_id: str, name: str) -> Optional[dict[str, list[str]]]:
        """{"stdout": [lines], "stderr": [lines]} of task ``task_id`` (``name``
        in log lines), or None when they cannot be read."""
        with self._lock:
            base = self._agents.get(task_id)
            silent = base in self._silent
        framework_id = self._framework_id()
        if base is None or framework_id is None or silent:
            return None
        credentials = self._credentials()
        auth = basic_auth(*credentials) if credentials else None
        try:
            return self._read(base, sandbox_path(framework_id, task_id), STREAMS, TAIL_BYTES,
                              TAIL_LINES, self._timeout, auth, self._tls)
        except AgentFilesError as exc:
            if exc.unreachable:
                with self._lock:
                    self._silent.add(base)
                logger.warning("cannot read the sandbox of %s from its agent (%s); not "
                               "asking that agent again", name, exc)
            else:
                logger.info("cannot read the sandbox of %s: %s", name, exc)
        except Exception:  # a bug here must not fail the run
            logger.exception("reading the sandbox of %s failed", name)
        return None


__all__ = ["SandboxTails", "TAIL_LINES", "TAIL_BYTES", "TIMEOUT"]
