"""Pytest fixtures for tests that need the embedded local master.

``local_master`` yields a started ``LocalMaster`` with one small agent and
short intervals (heartbeats every 0.5 s, allocation every 0.05 s, status
update retries after 0.5 s, 1 s kill grace) and stops it afterwards, even
when the test fails. ``make_local_master(**kwargs)`` builds more (custom
agents or intervals), all stopped at the end of the test. ``clients``:
``connect(master, **kwargs)`` gives a subscribed test SchedulerClient,
closed at the end of the test. Helpers: ``launch_running`` (a task on the
next offer, up to TASK_RUNNING), ``read_file`` (a sandbox file, waiting for
a text), ``RecordingRunner`` (a container runner double). ``pymesos_path``:
the PYTHONPATH entries that import pymesos and http-parser.

Tasks of a LocalMaster get a clean environment, so every master made here
passes the suite's leak marker (``conftest.MARKER``) in its
``executor_environment``: the session's leak guard finds every task.
"""

import dataclasses
import importlib
import os
import time

import pytest
from conftest import MARKER
from mesos_http_client import SchedulerClient, task_info

from mesos_local import AgentSpec, LocalMaster
from mesos_local.containerizer.runner import ProcessRunner, RunnerError

FAST = dict(heartbeat_interval=0.5, allocation_interval=0.05, status_update_retry=0.5,
            kill_grace_period=1.0)


def marked_environment(**variables):
    """An ``executor_environment`` that carries the leak marker."""
    return dict(variables, **{MARKER: os.environ[MARKER]})


def small_agent(**overrides):
    spec = dict(cpus=4, mem=4096, disk=10000, ports=((31000, 31009),), gpus=0)
    spec.update(overrides)
    return AgentSpec(**spec)


def _started_by(master):
    """Whether a process's environment (NUL-separated) is one of ``master``'s
    tasks': its agent id in MESOS_SLAVE_ID, or, for a nested container (which
    gets no agent variable), in the directory MESOS_SANDBOX names."""
    slave_id = ("MESOS_SLAVE_ID=%s-S" % master.id).encode()
    agents = ("/agents/%s-S" % master.id).encode()
    return lambda environ: any(
        item.startswith(slave_id) or (item.startswith(b"MESOS_SANDBOX=") and agents in item)
        for item in environ.split(b"\0"))


def leftover_processes(master):
    """Pids of live processes started by ``master`` (``_started_by``)."""
    started = _started_by(master)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                environ = f.read()
            with open("/proc/%s/stat" % name, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if started(environ) and state != b"Z":
            found.append(int(name))
    return found


def task_pids(master, task_id):
    """Pids of live processes of ``master``'s command task ``task_id`` (its
    executor id, as Mesos' command executor's)."""
    marker = ("MESOS_EXECUTOR_ID=%s" % task_id).encode()
    found = []
    for pid in leftover_processes(master):
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue
    return found


def session_of(pid):
    """The session id of process ``pid`` (None once it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[3])
    except (OSError, ValueError):
        return None


@pytest.fixture
def make_local_master():
    masters = []

    def make(agents=None, **kwargs):
        options = dict(FAST, executor_environment=marked_environment())
        options.update(kwargs)
        master = LocalMaster(agents=agents if agents is not None else [small_agent()],
                             **options)
        masters.append(master)
        master.start()
        return master

    try:
        yield make
    finally:
        for master in masters:
            master.stop()
        deadline = time.monotonic() + 30
        for master in masters:
            while leftover_processes(master) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert leftover_processes(master) == [], "tasks outlived LocalMaster.stop()"


@pytest.fixture
def local_master(make_local_master):
    yield make_local_master()


@pytest.fixture
def clients():
    """``connect(master, **kwargs)`` -> a subscribed SchedulerClient, closed at the end."""
    made = []

    def connect(master, subscribe=True, **kwargs):
        client = SchedulerClient(master.url, **kwargs)
        made.append(client)
        if subscribe:
            client.subscribe()
        return client

    try:
        yield connect
    finally:
        for client in made:
            client.close()


@pytest.fixture
def pymesos_path(monkeypatch):
    """The PYTHONPATH entries that import pymesos 0.3.15 and http-parser
    (for a process of its own: a framework, an executor). http-parser's C
    extension does not build on Python 3.11 (pymesos issue #130), so both
    run on its pure-Python parser: scripts/test.sh unpacks them, never
    installed, where TFMESOS_TEST_PYMESOS names; where it is set, a missing
    import fails the test, else the test is skipped."""
    where = os.environ.get("TFMESOS_TEST_PYMESOS")
    if where:
        monkeypatch.syspath_prepend(where)
        modules = [importlib.import_module(name) for name in ("pymesos", "http_parser.http")]
    else:
        modules = [pytest.importorskip(name) for name in ("pymesos", "http_parser.http")]
    return sorted({os.path.dirname(os.path.dirname(module.__file__)) for module in modules})


def read_file(path, timeout=30, contains=None):
    """The text of ``path`` ("" while it does not exist); with ``contains``,
    once it contains that (or ``timeout`` s passed: the caller's assertion
    then shows what is there)."""
    deadline = time.monotonic() + timeout
    while True:
        text = open(path).read() if os.path.exists(path) else ""
        if contains is None or contains in text or time.monotonic() > deadline:
            return text
        time.sleep(0.02)


def launch_running(client, master, task_id, command, **kwargs):
    """Launch one task on the next offer and wait for TASK_RUNNING (acked)."""
    offer = client.next_offers()[0]
    client.launch(offer, [task_info(task_id, offer, command, **kwargs)],
                  filters={"refuse_seconds": 0})
    client.wait_state(task_id, "TASK_RUNNING")
    return offer


class RecordingRunner:
    """A container runner double: records each TaskLaunch and runs its command
    as a plain process (the image is ignored), or fails like a missing image."""

    def __init__(self, fail=None):
        self.launches = []
        self.fail = fail
        self._processes = ProcessRunner()

    def launch(self, launch):
        self.launches.append(launch)
        if self.fail:
            raise RunnerError(self.fail)
        return self._processes.launch(dataclasses.replace(launch, image=None))
