"""SIGINT and SIGTERM while a run waits for its events (core.signals): the
signal is put on the run's queue and the loop raises KeyboardInterrupt
between two events, never inside a wait. (A KeyboardInterrupt raised inside
queue.Queue.get, as Condition.wait takes its lock back, released a lock the
main thread did not hold: a RuntimeError, or another thread's lock freed
under it; CI saw a tfrun that SIGINT left hanging.)"""

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from policy_helpers import RealRun

from tfmesos.core.events import Interrupted
from tfmesos.core.jobs import Job
from tfmesos.core.signals import (
    deferring_signals,
    ignore_signals,
    interrupt_on_signals,
    interruptible,
    interrupting_only_inside,
    interrupts_queued_on,
)


def let_handlers_run():
    for _ in range(1000):   # handlers run between bytecodes: they ran by the end
        pass


def test_a_signal_while_a_run_waits_is_queued_and_raised_when_the_wait_ends_untaken():
    """Queued, not raised where the main thread was; one that no loop took
    (it came after the wait's last event: the cluster formed, the trainers
    were done) is raised as the wait ends, not lost."""
    events, queued = queue.SimpleQueue(), []
    with interrupt_on_signals(), pytest.raises(KeyboardInterrupt):
        with interrupts_queued_on(events):
            os.kill(os.getpid(), signal.SIGTERM)
            let_handlers_run()
            queued.append(events.get_nowait())   # not raised here
    assert queued == [Interrupted(signal.SIGTERM)]


def test_a_second_signal_before_the_loop_took_the_first_raises_at_once():
    events, raised_at_once = queue.SimpleQueue(), []
    with interrupt_on_signals(), pytest.raises(KeyboardInterrupt):
        with interrupts_queued_on(events):
            os.kill(os.getpid(), signal.SIGINT)
            let_handlers_run()
            try:
                os.kill(os.getpid(), signal.SIGINT)
                let_handlers_run()
            except KeyboardInterrupt:
                raised_at_once.append(True)
                raise
    assert raised_at_once and events.get_nowait() == Interrupted(signal.SIGINT)


def test_outside_a_run_s_wait_a_signal_raises_as_ctrl_c_does():
    events = queue.SimpleQueue()
    with interrupt_on_signals():
        with interrupts_queued_on(events):
            pass
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            let_handlers_run()
    assert events.empty()


def test_a_wait_in_another_thread_leaves_the_main_thread_s_signals_as_they_are():
    events, entered, leave = queue.SimpleQueue(), threading.Event(), threading.Event()

    def wait_elsewhere():
        with interrupts_queued_on(events):
            entered.set()
            leave.wait(30)

    waiter = threading.Thread(target=wait_elsewhere)
    waiter.start()
    try:
        assert entered.wait(30)
        with interrupt_on_signals(), pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            let_handlers_run()
    finally:
        leave.set()
        waiter.join(30)
    assert events.empty()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_run_interrupted_while_it_waits_raises_from_its_loop_and_stops(signum):
    """The run's loop (``ClusterRun.step``) raises, not the queue's wait it
    was blocked in; the run then stops as a Ctrl-C'd run does."""
    real = RealRun([Job("worker", num=2)])
    try:
        real.running()
        waiting, sender = threading.Event(), None
        step = real.run.step

        def step_and_say_so(timeout):
            waiting.set()   # inside wait_finished: the signal is sent from now on
            step(timeout)

        real.run.step = step_and_say_so
        with interrupt_on_signals():
            # Sent while the loop waits in the queue's get (its 1-s step).
            sender = threading.Thread(target=lambda: waiting.wait(30) and (
                time.sleep(0.1), os.kill(os.getpid(), signum)))
            sender.start()
            try:
                with pytest.raises(KeyboardInterrupt) as caught:
                    real.run.wait_finished()
            finally:
                sender.join(30)
        innermost = caught.traceback[-1]
        assert (os.path.basename(str(innermost.path)), innermost.name) == ("launch.py", "step")
        real.run.record.ended(caught.value, real.phase)
        real.stop()
        assert real.phase == "stopped"
        assert real.record.outcome_status == "interrupted"
    finally:
        real.close()


def test_a_ctrl_c_once_the_run_is_stopped_cuts_tfruns_last_words_short_without_a_traceback(
        capsys):
    """tfrun's end (``cli.tfrun.execute``): Ctrl-C ends end_mlflow's wait with
    a line of its own; one that comes just before that wait (CI: a traceback
    instead of the line) or during the last lines is said in one line too,
    and the run's exit code stands."""
    from types import SimpleNamespace

    from tfmesos.cli.tfrun import execute

    def cut_short():
        raise KeyboardInterrupt    # as a SIGINT between the run's stop and the wait

    record = SimpleNamespace(directory=None, hint=None, ended=lambda *_: None,
                             run_json_error=None)
    run = SimpleNamespace(start=lambda: None, wait_ready=lambda: {"worker": ["h:1"]},
                          wait_finished=lambda: 0, stop=lambda: None, record=record,
                          spec=SimpleNamespace(failover_timeout=None), mlflow=object(),
                          end_mlflow=cut_short, detached=False)
    try:
        code = execute(run, None, None, advice=False)
    except KeyboardInterrupt:   # (not let through: it would end the whole test session)
        pytest.fail("a Ctrl-C after the run's stop escaped tfrun: a traceback")
    assert code == 0
    assert capsys.readouterr().err.splitlines() == [
        "tfrun: interrupted; MLflow was not told the run's end: the MLflow run may be "
        "incomplete"]


def test_inside_interrupting_only_inside_a_signal_interrupts_only_its_interruptible_parts():
    events = queue.SimpleQueue()
    with interrupting_only_inside():
        signal.raise_signal(signal.SIGINT)         # ignored: not an interruptible part
        signal.raise_signal(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            with interruptible():
                signal.raise_signal(signal.SIGTERM)
        with interruptible():                      # and a run's wait queues it, as before
            with pytest.raises(KeyboardInterrupt):
                with interrupts_queued_on(events):
                    signal.raise_signal(signal.SIGINT)
                    assert events.get_nowait() == Interrupted(signal.SIGINT)
                    raise KeyboardInterrupt   # as the loop does, taking it
        signal.raise_signal(signal.SIGINT)         # ignored again
    assert events.empty()


def finished_run(stop):
    """A run for ``execute`` that finishes (exit code 0) and stops with ``stop``."""
    from types import SimpleNamespace
    record = SimpleNamespace(directory=None, hint=None, ended=lambda *_: None,
                             run_json_error=None)
    return SimpleNamespace(start=lambda: None, wait_ready=lambda: {"worker": ["h:1"]},
                           wait_finished=lambda: 0, stop=stop, record=record,
                           spec=SimpleNamespace(failover_timeout=None), mlflow=None,
                           end_mlflow=lambda: None, detached=False)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_as_tfrun_begins_to_stop_its_run_neither_escapes_nor_skips_the_stop(
        capsys, signum):
    """CI (a second Ctrl-C as tfrun stopped its run): the ``with
    ignore_signals()`` around the stop was entered only after the
    ``finally``'s first lines; a signal there escaped ``execute`` as a
    traceback, and the run was never stopped."""
    from tfmesos.cli.tfrun import execute

    class Progress:
        def ready(self):
            pass

        def clear(self):   # the finally's first line
            signal.raise_signal(signum)

    stops = []
    try:
        code = execute(finished_run(lambda: stops.append(True)), None, Progress(), advice=False)
    except KeyboardInterrupt:   # (not let through: it would end the whole test session)
        pytest.fail("a signal as the run began to stop escaped tfrun: a traceback")
    assert code == 0 and stops == [True]
    assert capsys.readouterr().err == ""


def test_a_detached_runs_scheduler_says_its_last_words_through_its_teardowns_sigterm(capsys):
    """A detached run's scheduler is SIGTERMed by its own teardown (Mesos
    kills a framework's tasks, the scheduler task among them): one that came
    once the run was stopped cut its summary short with "tfrun:
    interrupted", which tfmesos attach relayed after a run that succeeded."""
    from tfmesos.cli.tfrun import execute

    run = finished_run(lambda: None)
    run.detached = True
    run.record.directory = "/nowhere/run"
    run.record.run_json_error = OSError(28, "No space left on device")
    run.end_mlflow = lambda: signal.raise_signal(signal.SIGTERM)   # the teardown's
    try:
        code = execute(run, None, None, advice=False)
    except KeyboardInterrupt:
        pytest.fail("the teardown's SIGTERM escaped the scheduler's end: a traceback")
    assert code == 0
    assert capsys.readouterr().err.splitlines() == [
        "tfrun: warning: run.json in /nowhere/run could not be written (No space left on "
        "device): it does not hold this run's end"]


def test_deferred_signals_reach_their_handlers_once_the_block_ends():
    got = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        with deferring_signals():
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGTERM)   # the same signal twice: once after
            let_handlers_run()
            assert got == []
        assert got == [signal.SIGTERM]
        with pytest.raises(KeyboardInterrupt):    # Python's own Ctrl-C, after the block
            with deferring_signals():
                signal.raise_signal(signal.SIGINT)
                let_handlers_run()
                got.append("block ended")
        assert got == [signal.SIGTERM, "block ended"]
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_signal_whose_handler_was_not_installed_from_python_is_not_deferred(monkeypatch):
    # signal.getsignal says None for a handler a C library installed: it
    # could not be put back after the block, and the signal would be held
    # for good; it is left to that handler.
    got = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        real = signal.getsignal
        monkeypatch.setattr(signal, "getsignal",
                            lambda sig: None if sig == signal.SIGTERM else real(sig))
        with deferring_signals():
            signal.raise_signal(signal.SIGTERM)
            let_handlers_run()
            assert got == [signal.SIGTERM]   # at once, not after the block
        monkeypatch.undo()
        assert signal.getsignal(signal.SIGTERM) is not None and got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.parametrize("script, module, signum", [
    ("tfrun_script", "tfmesos.cli.tfrun_options", "SIGINT"),
    ("tfrun_script", "tfmesos.cli.tfrun_options", "SIGTERM"),
    ("tfrun_script", "tfmesos.cli.tfrun_options", "SIGHUP"),
    ("tfmesos_script", "tfmesos.cli.runs", "SIGINT")])
def test_a_ctrl_c_while_a_command_loads_its_modules_is_one_line_and_130(script, module, signum):
    """The console scripts (``tfmesos.cli.*_script``): a Ctrl-C as the
    command's modules load (its first ~60 ms, before any handler of its
    own) ended it with a KeyboardInterrupt traceback; tfrun's SIGTERM or
    SIGHUP then killed it silently (-15, -1)."""
    code = textwrap.dedent("""
        import signal, sys

        class CtrlC:   # a Ctrl-C as MODULE loads
            def find_spec(self, name, path=None, target=None):
                if name == "MODULE":
                    signal.raise_signal(signal.SIGNUM)
                return None

        sys.meta_path.insert(0, CtrlC())
        from tfmesos.cli import SCRIPT
        sys.argv = ["NAME", "runs"] if "NAME" == "tfmesos" else ["NAME", "-w", "1", "--", "true"]
        sys.exit(SCRIPT())
        """).replace("MODULE", module).replace("SCRIPT", script).replace(
            "NAME", script.split("_")[0]).replace("SIGNUM", signum)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env=dict(os.environ, MESOS_MASTER=""))
    assert (result.returncode, result.stderr) == (
        130, "%s: interrupted\n" % script.split("_")[0]), result.stderr



@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_while_tfrun_reads_its_options_is_one_line_and_130(signum, tmp_path):
    """tfrun checks its options before execute() puts its handlers in
    place: here it asks a master on this machine whether its agents are
    here (--ship, no --python), and the master never answers. A SIGTERM or
    SIGHUP there killed it silently (-15, -1: a shell's 143, 129)."""
    import socket

    from conftest import marked_processes
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(60)
        before = {pid for pid, _ in marked_processes()}
        tfrun = subprocess.Popen(
            [sys.executable, "-m", "tfmesos.cli.tfrun", "--ship", "-m",
             "127.0.0.1:%d" % listener.getsockname()[1], "-s", "0", "--", "true"],
            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=dict(os.environ, MESOS_MASTER=""))
        try:
            connection, _ = listener.accept()   # tfrun is reading its options: it asks
            with connection:
                tfrun.send_signal(signum)
                out, err = tfrun.communicate(timeout=60)
        finally:
            if tfrun.poll() is None:
                tfrun.kill()
                tfrun.communicate()
    assert (tfrun.returncode, err) == (130, "tfrun: interrupted\n"), err
    assert [p for p in marked_processes() if p[0] not in before] == []


def test_a_signal_ignored_while_a_run_stops_is_answered_once(capfd):
    # Ctrl-C and SIGTERM as tfrun stopped a task that ignores SIGTERM (its
    # grace period): nothing said for seconds, as if they were lost.
    with ignore_signals(notice="tfrun: still stopping every task\n"):
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):
            os.kill(os.getpid(), signum)
            let_handlers_run()
    assert capfd.readouterr().err == "tfrun: still stopping every task\n"
    with ignore_signals():          # without a notice: silent, as before
        os.kill(os.getpid(), signal.SIGINT)
        let_handlers_run()
    assert capfd.readouterr().err == ""


def test_a_sigterm_as_a_detached_run_starts_records_a_kill(tmp_path, capsys):
    """A detached run's scheduler task SIGTERMed (an operator's teardown,
    tfmesos kill, a KILL of the task) before its run's loop waits for
    events (here: as its backend starts): recorded ``interrupted`` and 130
    as a Ctrl-C, where the loop records a kill (``ClusterRun.step``)."""
    import json

    from policy_helpers import FakeBackend

    from tfmesos.cli.tfrun import execute
    from tfmesos.core.launch import ClusterRun
    from tfmesos.core.spec import RunSpec
    from tfmesos.mesos.mock_transport import MockTransport

    class SigtermedAsItStarts(FakeBackend):
        def start(self):
            signal.raise_signal(signal.SIGTERM)   # Mesos' SIGTERM to the task, here
            return super().start()

    spec = RunSpec(jobs=(Job("worker", num=1),), mode="replica", command="true",
                   master="mock-master:5050",
                   run_dir=str(tmp_path / "run"))
    run = ClusterRun(spec, environ={}, backend=SigtermedAsItStarts(), transport=MockTransport(),
                     detached=True)
    code = execute(run, None, None, advice=False)
    with open(tmp_path / "run" / "run.json", encoding="utf-8") as handle:
        outcome = json.load(handle)["outcome"]
    assert (code, outcome["status"], outcome["exit_code"]) == (143, "killed", 143), \
        (code, outcome, capsys.readouterr().err)


def test_a_sigterm_as_the_detached_scheduler_loads_its_modules_is_one_line_and_143():
    """Before its run exists (its modules loading, its document read) a
    SIGTERM killed the scheduler task silently (-15): nothing said why."""
    code = textwrap.dedent("""
        import runpy, signal, sys

        class Sigterm:   # Mesos' SIGTERM as the scheduler's run modules load
            def find_spec(self, name, path=None, target=None):
                if name == "tfmesos.core.launch":
                    signal.raise_signal(signal.SIGTERM)
                return None

        sys.meta_path.insert(0, Sigterm())
        sys.argv = ["detached_scheduler", "detached.json"]
        runpy.run_module("tfmesos.cli.detached_scheduler", run_name="__main__")
        """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env=dict(os.environ, MESOS_MASTER=""))
    assert (result.returncode, result.stderr) == (
        143, "tfrun: the run was killed: Mesos killed its scheduler task as it started (its "
        "framework torn down by an operator or tfmesos kill, or the task killed)\n"), \
        result.stderr
