"""Where a run's Mesos master lives: a remote Mesos cluster
(``remote.RemoteMaster``) or the embedded single-machine master
(``embedded.EmbeddedMaster``, the ``mesos_local`` package).

A backend tells the run what depends on that place and nothing else: the
master's address for the driver, the host the run's listeners bind, the
address tasks reach them at, the credentials the driver sends, and what to
stop at the end. ``core.launch.ClusterRun`` composes one (``Backend``);
tests give it their own.
"""

from typing import TYPE_CHECKING, Optional, Protocol

if TYPE_CHECKING:
    from ..exceptions import TFMesosError


class Backend(Protocol):
    """What a run needs to know of where its master lives."""

    @property
    def credentials(self) -> Optional[tuple[str, str]]:
        """(principal, secret) the driver authenticates with; None: as
        configured. Read only: the run never sets them (an attribute of a
        backend matches, its type narrower: the embedded master's are never
        None)."""

    @property
    def principal(self) -> Optional[str]:
        """The Mesos principal the run authenticates as (None: none), known
        before ``start``: the run's identity has it."""

    def start(self) -> str:
        """Make the master reachable (start it, when it is ours); its address."""

    def check(self) -> None:
        """TFMesosError when the address tasks would reach the run at is
        wrong; nothing is started (``start`` checks it too)."""

    def bind_host(self) -> Optional[str]:
        """The host the run's listeners bind: the advertised address's
        (None: every address)."""

    def advertised_address(self, master_url: str) -> str:
        """The address tasks reach this process at, given the master's URL
        (the leader's, once known)."""

    def unreachable_from(self, hostname: str, advertised: str) -> "Optional[TFMesosError]":
        """Why tasks on the agent at ``hostname`` cannot reach the run at
        ``advertised`` (its fields still to be worded), or None."""

    def describe(self) -> str:
        """How the user is told where the run goes (``the embedded master``)."""

    def stop(self) -> None:
        """Stop what ``start`` started (nothing for a remote master)."""


__all__ = ["Backend"]
