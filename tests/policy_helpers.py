"""The failure policy's fake run: the real ``RunState`` and ``Control`` (what
each policy call does to the run is theirs), with effects that only record
what the policy asked for, and a fake clock."""

from addict import Dict

from tfmesos.core.control import Control
from tfmesos.core.events import StatusUpdate, TaskExited
from tfmesos.core.phase import Phase
from tfmesos.core.reactions import RunEvents
from tfmesos.core.recovery import Recovery
from tfmesos.core.state import RunState
from tfmesos.record.run_record import RunRecord
from tfmesos.record.schema import RunFile

GRACE = 40.0
MAX_ATTEMPTS = 3


class RecordedEffects:
    """``control.Effects`` that note each call in ``calls``."""

    def __init__(self, state):
        self.state = state
        self.clock = 1000.0
        self.calls = []
        self.reconciled = 0

    def now(self):
        return self.clock

    def ask_for_offers(self):
        pending = tuple(slot.name for slot in self.state.slots.pending())
        self.calls.append(("offers for",) + pending)

    def send_stop(self, task_id):
        self.calls.append(("stop", self.state.slots.slot_of(task_id).name))

    def forget_task(self, task_id):
        pass

    def kill(self, task_id, agent_id):
        self.calls.append(("kill", task_id))

    def publish_to(self, slot):
        self.calls.append(("publish", slot.name))

    def show(self, slot, stream, text):
        pass

    def reconcile(self):
        self.reconciled += 1

    def new_launch_deadline(self):
        self.calls.append(("deadline",))


class FakeRun:
    """A run in FORMING with every slot launched and running, driven by hand:
    events go to the real policy, which acts on the real state and control."""

    def __init__(self, jobs, mode="replica", policy=None, sticky=(), sticky_timeout=120.0,
                 sandboxes=None, framework_outcome=lambda: None, rendezvous_host=None,
                 framework_removed=lambda: None, process_group=None):
        self.state = RunState(jobs)
        self.state.move(Phase.FORMING)
        self.effects = RecordedEffects(self.state)
        self.control = Control(self.state, self.effects)
        self.notes = []
        self.record = RunRecord(None, RunFile(mode=mode), self.state.slots, forwarding=False)
        self.recovery = Recovery(self.control, self.record, policy, sticky, sticky_timeout,
                                 MAX_ATTEMPTS, notify=self.notes.append,
                                 rendezvous_host=rendezvous_host)
        self.events = RunEvents(self.control, self.record, self.recovery, GRACE, MAX_ATTEMPTS,
                                mode, sandboxes=sandboxes,
                                framework_outcome=framework_outcome,
                                framework_removed=framework_removed,
                                process_group=process_group, notify=self.notes.append)
        self._launches = 0
        for slot in self.slots:
            self.launch(slot)

    @property
    def slots(self):
        return self.state.slots

    @property
    def phase(self):
        return self.state.phase

    @property
    def calls(self):
        return self.effects.calls

    @property
    def reconciled(self):
        return self.effects.reconciled

    # -- driving it ------------------------------------------------------------

    def launch(self, slot, agent="agent-1"):
        self._launches += 1
        self.slots.launched(slot, "t%d" % self._launches, agent, 31000 + self._launches)
        self.slots.status(slot, "TASK_RUNNING", "", None)

    def running(self):
        """Every slot registers; the cluster is complete."""
        for slot in self.slots:
            self.slots.registered(slot, "h:%d" % slot.port)
        assert self.state.move(Phase.RUNNING)

    def stop(self):
        """The run stops (``ClusterRun.stop``'s first move)."""
        assert self.state.move(Phase.STOPPING)

    def handle(self, event):
        """As the thread that waits on a run does: the event, what is due,
        then the run's failure raised."""
        self.events.handle(event)
        self.tick()

    def tick(self):
        self.events.tick()
        self.recovery.tick()
        if self.state.failure is not None:
            raise self.state.failure

    def status(self, name, state, message="", reason=None):
        slot = self.slots.named(name)
        self.handle(StatusUpdate(Dict(task_id={"value": slot.task_id}, state=state,
                                      message=message, reason=reason,
                                      agent_id={"value": slot.agent_id})))

    def exit(self, name, code):
        self.handle(TaskExited(self.slots.named(name).task_id, code))

    def later(self, seconds):
        self.effects.clock += seconds
        self.tick()


# -- the same, on a real ClusterRun (tests/test_run_contract.py) -----------------------

class FakeClock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


class FakeBackend:
    """A master that is the mock transport's: nothing to start or stop."""

    credentials = None
    principal = None

    def __init__(self):
        self.stopped = False

    def start(self):
        return "mock-master:5050"

    def check(self):
        pass

    def bind_host(self):
        return "127.0.0.1"

    def advertised_address(self, master_url):
        return "127.0.0.1"

    def unreachable_from(self, hostname, advertised):
        return None

    def describe(self):
        return "the mock master"

    def stop(self):
        self.stopped = True


EVENT_WAIT = 10.0   # for an event the driver's dispatcher thread hands on


class RealRun:
    """``FakeRun``'s interface on a real ``ClusterRun`` whose driver talks to
    a ``MockTransport``: a run in FORMING with every slot launched and
    running once built. Events reach it as they reach any run: Mesos' through
    the driver and the scheduler, the rendezvous' on its queue; each call
    handles them as the thread that waits does (``ClusterRun.step``)."""

    def __init__(self, jobs, mode="replica", policy=None, sticky=(), sticky_timeout=120.0,
                 unanswered_launch=None):
        """``unanswered_launch``: the first LAUNCH gets no answer (a timeout)
        and the master got it (True: its tasks run) or not (False: they get
        no update; the test says what Mesos answers)."""
        from tfmesos.core.launch import ClusterRun
        from tfmesos.core.restarts import RestartPolicy
        from tfmesos.core.spec import RunSpec
        from tfmesos.mesos.mock_transport import MockTransport

        self.mock = MockTransport()
        self.clock = FakeClock()
        self.backend = FakeBackend()
        spec = RunSpec(jobs=tuple(jobs), mode=mode, command="true", master="mock-master:5050",
                       run_dir=None, max_attempts=MAX_ATTEMPTS, reconnect_grace=GRACE,
                       restart_policy=policy or RestartPolicy(), sticky_jobs=tuple(sticky),
                       sticky_timeout=sticky_timeout)
        self.notes = []
        self._exited = []     # (task id, agent id, exit code) of each exit frame
        self.run = ClusterRun(spec, environ={}, backend=self.backend, transport=self.mock,
                              clock=self.clock, notify=self.notes.append)
        self.handled = []     # every event the run handled, in order
        handle = self.run.reactions.handle
        self.run.reactions.handle = lambda event: (self.handled.append(event), handle(event))
        if unanswered_launch is not None:
            self.mock.lose_answer("ACCEPT", arrives=unanswered_launch)
        self.run.start()
        self.handle_until(lambda event: type(event).__name__ == "Subscribed", "subscribed")
        self.offer()
        for slot in self.slots:
            self._wait(lambda slot=slot: slot.task_id is not None, "%s launched" % slot.name)
            if unanswered_launch is not False:
                self.update(slot.name, "TASK_RUNNING")

    @property
    def state(self):
        return self.run.state

    @property
    def slots(self):
        return self.run.slots

    @property
    def phase(self):
        return self.run.phase

    @property
    def record(self):
        return self.run.record

    def offer(self):
        """One offer of agent-1 that fits every slot."""
        from offers import offer
        self._offers = getattr(self, "_offers", 0) + 1
        self.mock.offer(offer("o%d" % self._offers, cpus=16.0, mem=65536.0, agent="agent-1",
                              hostname="127.0.0.1", ports=((31000, 31099),)))

    def _wait(self, condition, what):
        import time
        deadline = time.monotonic() + EVENT_WAIT
        while not condition():
            assert time.monotonic() < deadline, "not within %.0f s: %s" % (EVENT_WAIT, what)
            time.sleep(0.01)

    def update(self, name, state, message="", reason=None, task_id=None):
        """Mesos' update of ``name``'s current attempt, through the driver;
        handled once it reached the run's queue."""
        slot = self.slots.named(name)
        status = {"task_id": {"value": task_id or slot.task_id}, "state": state,
                  "message": message, "agent_id": {"value": slot.agent_id or "agent-1"},
                  "source": "SOURCE_EXECUTOR"}
        if reason:
            status["reason"] = reason
        task_id = status["task_id"]["value"]
        if self.run.state.ending:
            # The driver calls back no more: an update it had queued before.
            from addict import Dict

            from tfmesos.core.events import StatusUpdate
            self.handle(StatusUpdate(Dict(status)))
            return
        self.mock.update(status)
        self.handle_until(lambda event: type(event).__name__ == "StatusUpdate"
                          and event.status.task_id.value == task_id
                          and event.status.state == state, "%s %s" % (name, state))

    def handle_until(self, seen, what):
        """Handle events, as the waiting thread does, until one that ``seen``
        picks was handled."""
        import time
        deadline = time.monotonic() + EVENT_WAIT
        start = len(self.handled)
        while not any(seen(event) for event in self.handled[start:]):
            assert time.monotonic() < deadline, "not within %.0f s: %s" % (EVENT_WAIT, what)
            self.run.step(0.05)

    # -- FakeRun's interface -------------------------------------------------------

    def running(self):
        from tfmesos.core.events import TaskRegistered
        for slot in self.slots:
            self.run.events.put(TaskRegistered(slot.task_id, "127.0.0.1", slot.port))
        self.run.form()
        assert self.phase == "running"

    def stop(self):
        self.run.stop()

    def handle(self, event):
        self.run.events.put(event)
        self.handle_until(lambda handled: handled is event, repr(event))

    def status(self, name, state, message="", reason=None):
        self.update(name, state, message, reason)

    def exit(self, name, code):
        from tfmesos.core.events import TaskExited
        slot = self.slots.named(name)
        self._exited.append((slot.task_id, slot.agent_id, code))
        self.handle(TaskExited(slot.task_id, code))

    def later(self, seconds):
        self.clock.now += seconds
        self.run.step(0.01)

    def close(self):
        # Mesos' terminal update of each task whose exit frame came, as an
        # agent sends it (else stop() waits last_updates.MESOS_ENDS_WAIT for it).
        for task_id, agent_id, code in self._exited:
            self.mock.update({"task_id": {"value": task_id}, "state": "TASK_FAILED",
                              "message": "Command exited with status %d" % code,
                              "agent_id": {"value": agent_id or "agent-1"},
                              "source": "SOURCE_EXECUTOR"})
        self.run.stop()
