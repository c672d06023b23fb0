"""A run on the embedded master (``--master local``, the default without
``MESOS_MASTER``): started for the run, sized so its whole cluster fits
(``sizing``), on loopback unless tasks must reach it from elsewhere."""

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional

from mesos_local import generate_credentials

from .advertise import bind_address, checked

if TYPE_CHECKING:   # the master's imports come when it starts
    from mesos_local import LocalMaster

    from ..exceptions import TFMesosError
    from .sizing import JobResources
    from .warm_runner import WarmProcessRunner

LOOPBACK = "127.0.0.1"


class EmbeddedMaster:
    """The ``mesos_local.LocalMaster`` of one run of ``jobs``. ``containers``:
    the run has an image; ``options``: the master's own (``LocalMaster``'s
    keywords); ``runner``: its task runner started early (tfrun's warm
    task starts, ``warm_runner``), else ``make_runner()`` makes one when
    the master starts (None: the master's own); either is the master's to
    close once it runs. ``environ`` is not read:
    ``$TFMESOS_ADVERTISE_ADDRESS`` is for remote masters."""

    def __init__(self, jobs: "Iterable[JobResources]", containers: bool = False,
                 options: Optional[Mapping[str, Any]] = None, advertise: Optional[str] = None,
                 environ: Optional[Mapping[str, str]] = None,
                 runner: Optional["WarmProcessRunner"] = None,
                 make_runner: Optional[Callable[[], Optional["WarmProcessRunner"]]] = None) -> None:
        self.jobs = list(jobs)
        self.containers = containers
        self.options = dict(options or {})
        self._explicit = advertise
        self._runner = runner
        self._make_runner = make_runner
        self.master: Optional[LocalMaster] = None   # once started
        # This run's own, made for it: the master authenticates nobody else.
        self.credentials: tuple[str, str] = generate_credentials()

    @property
    def principal(self) -> str:
        return self.credentials[0]

    def start(self) -> str:
        from .sizing import start_local_master  # the master's imports, when it starts

        self.check()
        options = dict(self.options)
        if self._runner is None and self._make_runner is not None:
            self._runner = self._make_runner()
        if self._runner is not None:
            options["runner"] = self._runner
            self._runner = None     # the master's now: its stop() closes it
        self.master, url = start_local_master(self.jobs, self.credentials,
                                              containers=self.containers, **options)
        return url

    def check(self) -> None:
        """A given ``--advertise-address`` must be this machine's
        (``advertise.checked``; TFMesosError), and not loopback for agents
        in network namespaces of their own: they are other hosts to the
        tasks."""
        if self._explicit:
            checked(self._explicit, elsewhere="the agents are in network namespaces of their "
                    "own" if self.options.get("network_namespaces") else None)

    def bind_host(self) -> Optional[str]:
        """Loopback for the master's own tasks, else the given address
        (``advertise.bind_address``)."""
        return bind_address(self._explicit) if self._explicit else LOOPBACK

    def advertised_address(self, master_url: str) -> str:
        """``--advertise-address`` (checked by ``start``), else loopback."""
        return self._explicit or LOOPBACK

    def unreachable_from(self, hostname: str, advertised: str) -> "Optional[TFMesosError]":
        """None: its agents reach what it advertises (loopback, or an
        address given and checked)."""
        return None

    def describe(self) -> str:
        return "the embedded master"

    def stop(self) -> None:
        """Stop the master: its tasks are gone when this returns; its
        cgroups and sandboxes go after, in a detached cleaner of its own
        (``LocalMaster.stop(detached_cleanup=True)``): off the path that
        decides when tfrun exits (issue 33)."""
        if self.master is not None:
            self.master.stop(detached_cleanup=True)
        if self._runner is not None:   # the master never started
            self._runner.close()
            self._runner = None


__all__ = ["EmbeddedMaster"]
