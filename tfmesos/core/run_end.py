"""How a run ends (``ClusterRun.stop``, ``ClusterRun.detach``), once, under
the run's ``stop_lock``:

* stopped: the scheduler launches nothing more, every task is told to stop
  (and given ``STOP_LINGER`` to send its last output), Mesos' last updates
  are waited for, a detached run labels its outcome, the framework is torn
  down and the record finished;
* left to its tasks (``--failover``, ``--detach``, Ctrl-C in ``tfmesos
  attach``): no stop message and no teardown, so the tasks keep running for
  the framework's failover timeout; the record stays open (its outcome
  ``running``) for the scheduler that takes the run over.
"""

import logging

from ..exceptions import MesosError
from .detached import label_outcome
from .last_updates import record_leftovers, wait_for_mesos_ends
from .phase import Phase

logger = logging.getLogger(__name__)

# How long stopping waits for tasks to close their rendezvous connections
# after a stop message, so that their last output reaches the run directory.
STOP_LINGER = 1.5


def stop_run(run):
    with run.stop_lock:
        with run.state.lock:
            was_running = run.phase == Phase.RUNNING
            if not run.state.move(Phase.STOPPING):
                return
        scheduler, rendezvous, driver = _launch_nothing_more(run)
        if rendezvous is not None:
            for slot in run.slots:
                if slot.task_id:
                    run.record.stopping(slot.task_id)
                    rendezvous.send(slot.task_id, {"type": "stop"})
            rendezvous.close(linger=STOP_LINGER)
        if driver is not None:
            wait_for_mesos_ends(run.record, run.events)
            if run.detached:   # a finished framework keeps its labels
                label_outcome(driver, run.framework_info, run.record.snapshot()["outcome"],
                              was_running and run.trainers_done())
            try:
                driver.stop()
            except MesosError as exc:
                logger.warning("could not tear the framework down: %s", exc)
            try:
                driver.join(timeout=15)
            except Exception as exc:  # the run's own error was already raised
                logger.debug("driver ended with %r", exc)
        _release(run)
        run.record.finish(scheduler and scheduler.framework_id,
                          scheduler and scheduler.first_offer_at,
                          "succeeded" if was_running else "aborted")
        if run.mlflow_at_stop:
            run.end_mlflow()


def leave_run(run):
    with run.stop_lock:
        if not run.state.move(Phase.STOPPING):
            return
        _, rendezvous, driver = _launch_nothing_more(run)
        if rendezvous is not None:
            rendezvous.close()
        if driver is not None:
            try:
                driver.stop(failover=True)
                driver.join(timeout=15)
            except Exception as exc:  # leaving: what the driver says changes nothing
                logger.debug("driver ended with %r", exc)
        _release(run)
        run.record.save()
        run.mlflow = None


def _launch_nothing_more(run):
    """The run ends here: its scheduler launches nothing more; (scheduler,
    rendezvous, driver)."""
    if run.scheduler is not None:
        run.scheduler.close()
    return run.scheduler, run.rendezvous, run.driver


def _release(run):
    """What is still queued goes to the record (output, exit frames, Mesos'
    updates, the teardown's included); the backend stops, nothing is served
    any more."""
    record_leftovers(run.record, run.events)
    run.backend.stop()
    if run.shipment is not None:
        run.shipment.stop()
    run.state.move(Phase.STOPPED)
