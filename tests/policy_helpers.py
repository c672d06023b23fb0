"""The failure policy's fake run: a ``run_control.RunControl`` that records
what ``RunEvents`` and ``Recovery`` asked for, with a fake clock."""

from addict import Dict

from tfmesos.core.events import StatusUpdate, TaskExited
from tfmesos.core.recovery import Recovery
from tfmesos.core.reactions import RunEvents
from tfmesos.core.phase import ENDING, Phase, next_phase
from tfmesos.record.run_record import RunRecord
from tfmesos.record.schema import RunFile
from tfmesos.core.slots import make_slots

GRACE = 40.0
MAX_ATTEMPTS = 3


class FakeRun:
    """A ``run_control.RunControl`` that records what the policy asked for."""

    def __init__(self, jobs, mode="replica", policy=None, sticky=(), sticky_timeout=120.0):
        self.slots = make_slots(jobs)
        self._phase = Phase.FORMING
        self.clock = 1000.0
        self.calls = []
        self.notes = []
        self.reconciled = 0
        self.record = RunRecord(None, RunFile(mode=mode), self.slots, forwarding=False)
        self.recovery = Recovery(policy, sticky, sticky_timeout,
                                 notify=self.notes.append).bind(self, self.record, MAX_ATTEMPTS)
        self.events = RunEvents(self, self.record, self.recovery, GRACE, MAX_ATTEMPTS, mode)
        self._launches = 0
        for slot in self.slots:
            self.launch(slot)

    # -- RunControl ------------------------------------------------------------

    @property
    def phase(self):
        return self._phase

    def move(self, target):
        moved = next_phase(self._phase, target)
        if moved is not None:
            self._phase = moved
        return moved is not None

    def now(self):
        return self.clock

    def relaunch(self, *slots):
        self.calls.append(("relaunch",) + tuple(slot.name for slot in slots))
        self.slots.requeue(slots)

    def end_task(self, slot):
        self.calls.append(("end", slot.name))
        self.events.forget(slot.task_id)

    def forget_task(self, task_id):
        pass

    def restart_cluster(self):
        if not self.move(Phase.RESTARTING):
            return False
        self.calls.append(("restart",))
        return True

    def relaunch_cluster(self):
        if not self.move(Phase.FORMING):
            return False
        self.slots.reset()
        self.calls.append(("relaunch all",))
        self.slots.requeue(list(self.slots))
        return True

    def fail(self, error):
        if self.phase in ENDING:
            self.calls.append(("failure ignored", str(error)))
            return
        raise error

    def publish_to(self, slot):
        self.calls.append(("publish", slot.name))

    def show(self, slot, stream, text):
        pass

    def kill(self, task_id, agent_id):
        self.calls.append(("kill", task_id))

    def reconcile(self):
        self.reconciled += 1

    # -- driving it ------------------------------------------------------------

    def launch(self, slot, agent="agent-1"):
        self._launches += 1
        self.slots.launched(slot, "t%d" % self._launches, agent, 31000 + self._launches)
        self.slots.status(slot, "TASK_RUNNING", "", None)

    def running(self):
        """Every slot registers; the cluster is complete."""
        for slot in self.slots:
            self.slots.registered(slot, "h:%d" % slot.port)
        assert self.move(Phase.RUNNING)

    def handle(self, event):
        self.events.handle(event)
        self.events.tick()
        self.recovery.tick()

    def status(self, name, state, message="", reason=None):
        slot = self.slots.named(name)
        self.handle(StatusUpdate(Dict(task_id={"value": slot.task_id}, state=state,
                                      message=message, reason=reason,
                                      agent_id={"value": slot.agent_id})))

    def exit(self, name, code):
        self.handle(TaskExited(self.slots.named(name).task_id, code))

    def later(self, seconds):
        self.clock += seconds
        self.events.tick()
        self.recovery.tick()
