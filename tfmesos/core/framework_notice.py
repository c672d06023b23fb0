"""What a run does once Mesos gave its framework an id, checked after each
event (``ClusterRun.step``): a run taken over reconciles what ran meanwhile
and records the takeover; a new framework gets its proof label (which only
its id makes: a takeover subscribes with it), tried again until set; the
caller's ``on_framework`` learns the identity. Through zk:// the framework
subscribed before the leader, and so the route the tasks take to this
process, was known: its rendezvous label is set to the tasks' address once
they differ (a task that lost this process reads it: task/rediscover.py)."""

from typing import TYPE_CHECKING, Callable, Optional

from ..protocol import labels as labels_
from .identity import RunIdentity

if TYPE_CHECKING:
    from ..record.run_record import RunRecord
    from .runtime import RunRuntime
    from .takeover import Adoption

OnFramework = Callable[[RunIdentity, Optional[str]], None]


class FrameworkNotice:
    def __init__(self, runtime: "RunRuntime", record: "RunRecord",
                 adoption: "Optional[Adoption]", on_framework: Optional[OnFramework]) -> None:
        self._runtime = runtime
        self._record = record
        self._adoption = adoption
        self._on_framework = on_framework
        self._told = False
        self._proved = False    # a new framework's proof label is set
        self._named = False     # the rendezvous label names the tasks' address

    def check(self) -> None:
        """Act once the framework has an id; the proof label until it is set."""
        self._tell()
        self._prove()
        self._name_rendezvous()

    def _tell(self) -> None:
        runtime = self._runtime
        scheduler = runtime.scheduler
        if self._told or scheduler is None or not scheduler.framework_id:
            return
        self._told = True
        identity = runtime.framework_known(scheduler.framework_id)
        if self._adoption is not None:   # what ran meanwhile: Mesos says at once
            self._adoption.reconcile(runtime.parts().driver)
            attempt = identity.scheduler_attempt
            if attempt > 1:   # not the first scheduler task of a detached run
                self._record.taken_over(attempt, "detached scheduler task %d" % attempt
                                        if runtime.detached else "tfmesos attach")
        else:
            self._prove()
        if self._on_framework is not None:
            self._on_framework(identity, self._record.directory)

    def _name_rendezvous(self) -> None:
        runtime = self._runtime
        driver = runtime.driver
        if self._named or runtime.identity.framework_id is None or driver is None \
                or not driver.connected:
            return
        wanted = runtime.rendezvous_address()
        named = runtime.rendezvous_label() == wanted or runtime.label(labels_.RENDEZVOUS, wanted)
        # Done once it names it, or a subscribed master refused it (not asked
        # again at every event); tried again when the call lost the subscription.
        self._named = named or driver.connected

    def _prove(self) -> None:
        identity = self._runtime.identity
        if self._proved or self._adoption is not None or identity.framework_id is None:
            return
        driver = self._runtime.driver
        # Tried again only while not subscribed: a master that refuses it is not asked again.
        self._proved = self._runtime.label(labels_.PROOF, identity.framework_proof()) \
            or driver is None or driver.connected
