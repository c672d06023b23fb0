"""The rendezvous under attack and under failure: slow clients, replayed
frames, accept() errors, dropped task connections."""

import contextlib
import errno
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
import types

import pytest
from conftest import marked_processes
from processes import TASK_ENTRY
from rendezvous_client import (
    SECRET,
    Client,
    admitted,
    finish,
    make_rendezvous,
    next_event,
    no_event,
    refused,
    replica_run,
)
from tfrun_helpers import REPO
from waiting import wait_until

from tfmesos.core import rendezvous, runtime
from tfmesos.core.events import TaskDisconnected, TaskExited, TaskOutput, TaskRegistered
from tfmesos.core.rendezvous import Rendezvous
from tfmesos.protocol import wire
from tfmesos.task import connection as task_connection
from tfmesos.task.connection import Connection
from tfmesos.task.task_environ import TaskEnv


@pytest.fixture
def rdv():
    server = make_rendezvous(register_timeout=30.0)
    server.expect("good")
    yield server
    server.close()


def connect(port, source="127.0.0.1"):
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))


# -- slow and idle clients ------------------------------------------------------


def test_registration_has_a_deadline_not_a_timeout_per_read():
    rdv = make_rendezvous(register_timeout=1.0)
    sock = connect(rdv.port)
    try:
        sock.sendall(struct.pack("!I", 1000))
        started = time.monotonic()
        while time.monotonic() - started < 30:  # a byte every 0.2 s resets a per-read timeout
            try:
                sock.sendall(b"x")
            except OSError:
                break
            time.sleep(0.2)   # the pace of a slow client, not a wait for something
        assert refused(sock, timeout=0.1)
        assert time.monotonic() - started < 10   # the 1 s deadline, not 30 s of trickling
    finally:
        sock.close()
        rdv.close()


def test_oldest_unregistered_connection_makes_room_for_a_task():
    rdv = make_rendezvous(register_timeout=30.0, max_pending_per_peer=4)
    rdv.expect("good")
    idle = []
    try:
        for _ in range(4):   # accepted in this order
            idle.append(connect(rdv.port))
            wait_until(lambda: admitted(rdv, idle[-1]))
        task = Client(rdv.port)
        task.register()
        task.registered()
        assert next_event(rdv, TaskRegistered).task_id == "good"
        assert refused(idle[0])
        assert not any(refused(sock, timeout=0.2) for sock in idle[1:])
    finally:
        for sock in idle:
            sock.close()
        rdv.close()


def test_one_address_can_only_evict_its_own_connections():
    rdv = make_rendezvous(register_timeout=30.0, max_pending=8, max_pending_per_peer=2)
    other = connect(rdv.port, "127.0.0.3")
    flood = []
    try:
        wait_until(lambda: admitted(rdv, other))
        for _ in range(6):   # accepted in this order
            flood.append(connect(rdv.port, "127.0.0.2"))
            wait_until(lambda: admitted(rdv, flood[-1]))
        assert all(refused(sock) for sock in flood[:4])
        assert not refused(other, timeout=0.3)
    finally:
        for sock in flood + [other]:
            sock.close()
        rdv.close()


class Slowloris:
    """``count`` clients that announce a ``size`` byte frame and send it a
    byte every ``interval`` s, reconnecting when dropped; for at most
    ``limit`` s."""

    def __init__(self, port, size, count=64, interval=0.5, limit=90.0):
        self.port, self.size, self.count = port, size, count
        self.interval, self.limit = interval, limit
        self.connections = 0
        self.most_open = 0
        self.ready = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open(self):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.sendall(struct.pack("!I", self.size))
        self.connections += 1
        return sock

    def trickle(self, sock):
        """Send a byte; False when the server closed the connection."""
        try:
            while sock.recv(65536, socket.MSG_DONTWAIT):
                pass  # the challenge
            return False  # end of file
        except BlockingIOError:
            sock.send(b"x")
            return True
        except OSError:
            return False

    def tick(self, socks):
        for index, sock in enumerate(socks):
            if sock is not None and not self.trickle(sock):
                sock.close()
                socks[index] = sock = None
            if sock is None:
                try:
                    socks[index] = self.open()
                except OSError:
                    pass
        self.most_open = max(self.most_open, sum(s is not None for s in socks))

    def run(self):
        socks = [None] * self.count
        deadline = time.monotonic() + self.limit
        try:
            while not self.done.is_set() and time.monotonic() < deadline:
                self.tick(socks)
                self.ready.set()
                self.done.wait(self.interval)
        finally:
            self.ready.set()
            for sock in socks:
                if sock is not None:
                    sock.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(10)


@pytest.mark.parametrize("size, sign", [
    (wire.MAX_FRAME, "refusing a frame of %d bytes" % wire.MAX_FRAME),
    (wire.SMALL_FRAME - 100, "dropped as the oldest of too many unregistered connections"),
], ids=["1MiB", "under-the-registration-limit"])
def test_64_slowloris_clients_do_not_stop_a_real_run(monkeypatch, caplog, size, sign):
    attacks = []

    def attacked_rendezvous(*args, **kwargs):
        """The run's rendezvous, under attack before any task is launched."""
        server = Rendezvous(*args, **kwargs)
        attacks.append(Slowloris(server.port, size).__enter__())
        attacks[0].ready.wait(10)
        return server

    monkeypatch.setattr(runtime, "Rendezvous", attacked_rendezvous)
    try:
        run = replica_run().start()
        assert attacks[0].most_open == 64
        assert finish(run) == 0
    finally:
        for attack in attacks:
            attack.__exit__()
    assert any(sign in r.getMessage() for r in caplog.records)
    assert not [p for p in marked_processes() if TASK_ENTRY in p[1]]


# -- replayed and misplaced frames ---------------------------------------------


def test_a_replayed_registration_after_a_drop_is_refused_and_gets_no_start(rdv):
    task = Client(rdv.port)
    frame = task.register()
    task.registered()
    next_event(rdv, TaskRegistered)
    assert rdv.send("good", {"type": "start", "cmd": "secret stuff"})
    assert task.receive_not_ping()["type"] == "start"
    task.close()
    next_event(rdv, TaskDisconnected)

    attacker = connect(rdv.port)
    try:
        challenge = wire.read_frame(attacker, wire.SMALL_FRAME)
        attacker.sendall(frame)
        rest = b""
        attacker.settimeout(5)
        while True:
            data = attacker.recv(65536)
            if not data:
                break
            rest += data
        assert rest == b"" and b"challenge" in challenge  # nothing after the challenge
        assert no_event(rdv, TaskRegistered)
    finally:
        attacker.close()

    again = Client(rdv.port)  # the real task can still come back
    again.register()
    again.registered()
    assert next_event(rdv, TaskRegistered).task_id == "good"
    assert again.receive_not_ping()["cmd"] == "secret stuff"
    again.close()


def test_an_exit_frame_is_refused_on_another_task_and_when_replayed(rdv):
    rdv.expect("other")
    one, two = Client(rdv.port), Client(rdv.port)
    one.register("good")
    two.register("other")
    one.registered()
    two.registered()
    exit_frame = one.send({"type": "exit", "code": 7})
    assert next_event(rdv, TaskExited) == TaskExited("good", 7)

    two.send({"type": "log", "stream": "stdout", "data": "so far so good\n"})
    two.sock.sendall(exit_frame)
    assert next_event(rdv, TaskOutput).task_id == "other"
    assert next_event(rdv, TaskDisconnected) == TaskDisconnected("other")
    assert two.refused()

    one.sock.sendall(exit_frame)  # the same frame again on its own connection
    assert next_event(rdv, TaskDisconnected) == TaskDisconnected("good")
    assert one.refused()
    assert no_event(rdv, TaskExited, 0.2)
    one.close()
    two.close()


# -- accept() errors -----------------------------------------------------------

EMFILE_SCRIPT = textwrap.dedent("""
    import os, queue, resource, sys, time
    sys.path.insert(0, %r)
    from tfmesos.core.rendezvous import Rendezvous
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    events = queue.Queue()
    rdv = Rendezvous(b"s" * 32, events, bind_host="127.0.0.1")
    rdv.expect("good")
    rdv.expect("other")
    hog = []
    try:
        while True:
            hog.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    print(rdv.port, flush=True)
    sys.stdin.readline()   # tasks are connecting: accept() fails with EMFILE
    time.sleep(1.5)
    for fd in hog:
        os.close(fd)
    for _ in range(2):
        event = events.get(timeout=20)
        print(type(event).__name__, event.task_id, flush=True)
    rdv.close()
""" % REPO)


@pytest.mark.waits
def test_accept_survives_running_out_of_file_descriptors():
    # The accept() blocked since the start holds a descriptor: the first
    # connection gets it, the next accept() fails with EMFILE.
    proc = subprocess.Popen([sys.executable, "-c", EMFILE_SCRIPT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tasks = []
    try:
        port = int(proc.stdout.readline())
        tasks = [Client(port) for _ in range(2)]   # the second waits in the backlog
        proc.stdin.write("go\n")
        proc.stdin.flush()
        for task, task_id in zip(tasks, ("good", "other")):
            task.sock.settimeout(15)
            task.register(task_id)
            task.registered()
        assert sorted(proc.stdout.readline().split() for _ in range(2)) == \
            [["TaskRegistered", "good"], ["TaskRegistered", "other"]]
        _, err = proc.communicate(timeout=15)
    finally:
        for task in tasks:
            task.close()
        proc.kill()
        proc.wait()
    assert err.count("cannot accept connections") == 1, err
    assert "Too many open files" in err


# -- dropped task connections --------------------------------------------------


def task_env(rdv, task_id="good"):
    return TaskEnv(("127.0.0.1", rdv.port), SECRET, task_id, "h", 2222)


class Receiver:
    """A thread that keeps calling ``conn.receive()``, as a task does."""

    def __init__(self, conn):
        self.conn = conn
        self.messages = []
        self.error = None
        self.ended = threading.Event()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        try:
            while True:
                self.messages.append(self.conn.receive())
        except wire.WireError as exc:
            self.error = exc
        finally:
            self.ended.set()


def cut(rdv, task_id="good"):
    """Break a task's connection on the scheduler's side, as a network would."""
    rdv._connections[task_id].sock.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def task(rdv):
    conn = Connection(task_env(rdv))
    conn.register("h", 2222)
    assert next_event(rdv, TaskRegistered) == TaskRegistered("good", "h", 2222)
    yield conn
    conn.close()


@pytest.mark.waits
def test_a_dropped_task_registers_again(rdv, task):
    assert rdv.send("good", {"type": "start", "n": 1})
    assert task.receive() == {"type": "start", "n": 1}
    receiver = Receiver(task)
    cut(rdv)
    assert next_event(rdv, TaskDisconnected) == TaskDisconnected("good")
    assert next_event(rdv, TaskRegistered) == TaskRegistered("good", "h", 2222)
    task.send({"type": "log", "stream": "stdout", "data": "still here\n"})
    assert next_event(rdv, TaskOutput).text == "still here\n"
    assert rdv.send("good", {"type": "stop"})
    deadline = time.monotonic() + 5
    while not receiver.messages and time.monotonic() < deadline:
        time.sleep(0.01)
    assert receiver.messages == [{"type": "stop"}]  # the repeated start was not returned
    rdv.forget("good")
    assert receiver.ended.wait(5)  # after a stop, a drop is the end
    assert no_event(rdv, TaskRegistered)


class FullDisk:
    """The task's stderr, a sandbox file on a full disk."""

    def write(self, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self):
        pass


def test_a_dropped_task_registers_again_though_its_sandbox_disk_is_full(rdv, task, monkeypatch):
    # The reconnecting thread said "lost the connection" first, on the full
    # disk: it ended there, and the task never registered again.
    monkeypatch.setattr(sys, "stderr", FullDisk())
    Receiver(task)
    cut(rdv)
    assert next_event(rdv, TaskDisconnected) == TaskDisconnected("good")
    assert next_event(rdv, TaskRegistered) == TaskRegistered("good", "h", 2222)
    task.send({"type": "log", "stream": "stdout", "data": "still here\n"})
    assert next_event(rdv, TaskOutput).text == "still here\n"

def test_output_sent_while_reconnecting_is_kept(rdv, task):
    receiver = Receiver(task)
    with rdv._lock:
        rdv._expected.discard("good")  # refuse the re-registration for now
    cut(rdv)
    deadline = time.monotonic() + 5
    while task._state != "reconnecting" and time.monotonic() < deadline:
        time.sleep(0.01)
    for n in range(3):
        task.send({"type": "log", "stream": "stdout", "data": "line %d\n" % n})
    rdv.expect("good")
    assert next_event(rdv, TaskRegistered).task_id == "good"
    assert [next_event(rdv, TaskOutput).text for _ in range(3)] == \
        ["line 0\n", "line 1\n", "line 2\n"]
    assert not receiver.ended.is_set()


def test_a_task_stops_at_once_when_the_rendezvous_is_closed(rdv, task):
    receiver = Receiver(task)
    started = time.monotonic()
    rdv.close()
    assert receiver.ended.wait(30)
    assert time.monotonic() - started < 10   # at once, not after the 30 s re-registration grace
    assert "gone" in str(receiver.error)
    with pytest.raises(ConnectionError):
        task.send({"type": "log", "stream": "stdout", "data": "x"})


@pytest.mark.waits
def refuse_as_unknown(rdv, task_id):
    """``rdv`` refuses ``task_id`` as an id it never knew (another
    scheduler's task), not as an attempt it forgot, which it tells to stop."""
    rdv.forget(task_id)
    with rdv._lock:
        rdv._over.pop(task_id, None)


@pytest.mark.waits
def test_a_task_gives_up_after_the_grace_period(rdv, task, monkeypatch):
    monkeypatch.setattr(task_connection, "REREGISTER_GRACE", 1.0)
    receiver = Receiver(task)
    refuse_as_unknown(rdv, "good")   # listening still, but refusing this task
    started = time.monotonic()
    assert receiver.ended.wait(30)
    assert 0.5 < time.monotonic() - started < 15   # the patched 1 s, not the default 30 s
    assert "cannot register" in str(receiver.error)


def test_no_reconnection_after_the_task_closed(rdv, task):
    receiver = Receiver(task)
    task.close()
    assert receiver.ended.wait(5)
    assert next_event(rdv, TaskDisconnected) == TaskDisconnected("good")
    assert no_event(rdv, TaskRegistered)


# -- stalled task connections ---------------------------------------------------


@pytest.fixture
def stalling_rdv():
    """Pings every 0.2 s; a connection silent for 1 s is stalled."""
    server = make_rendezvous(stall_timeout=1.0)
    server.expect("good")
    yield server
    server.close()


def test_a_silent_connection_is_closed_and_reported_as_stalled(stalling_rdv):
    client = Client(stalling_rdv.port)
    client.register()
    client.registered()
    heard = time.monotonic()   # after the registration arrived
    assert next_event(stalling_rdv, TaskRegistered).task_id == "good"
    event = next_event(stalling_rdv, TaskDisconnected)
    assert (event.task_id, event.reason) == ("good", "stalled")
    # When it was last heard (the rendezvous read the registration before
    # this test saw the answer), and silent for the stall timeout since then.
    assert event.since <= heard and time.monotonic() - event.since >= 1.0
    assert client.refused()
    client.close()


def test_a_stalled_connection_is_said_with_the_task_s_name(caplog):
    # "nothing came from tfmesos.983abf9c.ps.0.1 for 30 s": the task id,
    # where every other line says ps:0 (found by a review helper).
    rdv = make_rendezvous(stall_timeout=1.0, name_of={"good": "worker:1"}.get)
    rdv.expect("good")
    client = Client(rdv.port)
    try:
        client.register()
        client.registered()
        next_event(rdv, TaskDisconnected)
        [said] = [r.getMessage() for r in caplog.records if "nothing came" in r.getMessage()]
        assert said.startswith("nothing came from worker:1 for "), said
    finally:
        client.close()
        rdv.close()


@pytest.mark.waits
def test_a_task_answers_the_pings_and_does_not_stall(stalling_rdv):
    conn = Connection(task_env(stalling_rdv))
    conn.register("h", 2222)
    try:
        assert next_event(stalling_rdv, TaskRegistered).task_id == "good"
        receiver = Receiver(conn)   # reads the pings, as a task does
        assert no_event(stalling_rdv, TaskDisconnected, wait=4.0)
        assert not receiver.ended.is_set()
    finally:
        conn.close()
    assert next_event(stalling_rdv, TaskDisconnected) == TaskDisconnected("good", reason="closed")


@pytest.mark.waits
def test_a_pause_of_the_scheduler_itself_is_not_the_tasks_silence(stalling_rdv, monkeypatch):
    """The scheduler's process does not run for a while (a starved
    machine, TensorFlow holding the interpreter in the process that runs
    cluster()): when it runs again, the tasks that answer the pings are not
    called stalled for the time it did not read them (ps_coordinator's
    run failed so on a loaded machine)."""
    conn = Connection(task_env(stalling_rdv))
    conn.register("h", 2222)
    try:
        assert next_event(stalling_rdv, TaskRegistered).task_id == "good"
        receiver = Receiver(conn)
        # The rendezvous' clock jumps 5 s (stall_timeout: 1 s): what a pause looks like.
        monkeypatch.setattr(rendezvous, "time", types.SimpleNamespace(
            monotonic=lambda: time.monotonic() + 5.0, time=time.time))
        assert no_event(stalling_rdv, TaskDisconnected, wait=3.0)
        assert not receiver.ended.is_set()
    finally:
        conn.close()


class FineGrainedTask:
    """``run_fine_grained`` in a thread, registered on ``rdv``, with a
    stand-in TensorFlow whose server takes until ``release`` (3 s at most)
    to start. A task told to stop while it loads leaves its process
    (os._exit): here ``exits`` notes it instead (it ended pytest, exit
    code 0, summary unwritten, where a stop overtook the server's start)."""

    def __init__(self, rdv, monkeypatch):
        from tfmesos.task import tensorflow_server
        self.started, self.release = threading.Event(), threading.Event()
        self.exits = []
        monkeypatch.setattr(tensorflow_server, "_leave_process", self.exits.append)
        task = self

        class SlowServer:   # tf.distribute.Server
            target = "grpc://h:2222"

            def __init__(self, *args, **kwargs):
                task.started.set()
                task.release.wait(3.0)

        monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(
            distribute=types.SimpleNamespace(Server=SlowServer),
            train=types.SimpleNamespace(ClusterSpec=dict)))
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")   # no stderr filter process
        self.conn = Connection(task_env(rdv))
        self.conn.register("h", 2222)
        assert next_event(rdv, TaskRegistered).task_id == "good"
        self.outcome = []
        self.thread = threading.Thread(target=self._run, args=(tensorflow_server,))

    def _run(self, tensorflow_server):
        try:
            self.outcome.append(tensorflow_server.run_fine_grained(
                self.conn, {"cluster": {"worker": ["h:2222"]}, "job": "worker", "index": 0}))
        except Exception as exc:
            self.outcome.append(exc)

    def close(self):
        self.release.set()
        self.conn.close()
        if self.thread.is_alive() or self.thread.ident is not None:
            self.thread.join(30)


@pytest.mark.waits
def test_a_fine_grained_task_answers_the_pings_while_tensorflow_starts(stalling_rdv,
                                                                       monkeypatch):
    """TensorFlow's import and server start take seconds of CPU, more than
    the stall timeout on a loaded agent: the task reads its connection
    meanwhile (CI saw every task of a fine-grained run counted unreachable
    while their servers trained; the old task read nothing until its
    server was up)."""
    task = FineGrainedTask(stalling_rdv, monkeypatch)
    try:
        task.thread.start()
        assert task.started.wait(30)
        assert no_event(stalling_rdv, TaskDisconnected, wait=3.0)   # 3 stall timeouts
        task.release.set()
        assert stalling_rdv.send("good", {"type": "stop"})
        task.thread.join(30)
        assert task.outcome == [0]
    finally:
        task.close()


def test_a_fine_grained_task_told_to_stop_while_its_server_starts_leaves_at_once(
        stalling_rdv, monkeypatch):
    """It went on starting TensorFlow (~5 s of CPU on an agent) and the
    stop waited out its grace; it now leaves at once, exit code 0, as
    ``entry.run`` leaves once a server is up and stopped."""
    task = FineGrainedTask(stalling_rdv, monkeypatch)
    try:
        task.thread.start()
        assert task.started.wait(30)     # TensorFlow's server is starting
        assert stalling_rdv.send("good", {"type": "stop"})
        wait_until(lambda: task.exits, timeout=30)
        assert task.exits == [0]
    finally:
        task.close()


def test_a_fine_grained_task_whose_stdout_is_gone_still_ends_when_its_scheduler_does(
        monkeypatch):
    """The reading thread says "scheduler gone" on stdout; where that fails
    (a sandbox file that cannot be written) the task still ends: its main
    thread's wait returns, and the thread ends without a traceback (it
    ended in one, on stderr, after the wait had returned: CI saw it reach
    the next test)."""
    from tfmesos.task import tensorflow_server

    class Gone:   # a Connection whose scheduler is gone
        def receive(self):
            raise OSError(104, "Connection reset by peer")

        def close(self):
            pass

    class Unwritable:
        def write(self, text):
            raise OSError(28, "No space left on device")

        def flush(self):
            raise OSError(28, "No space left on device")

    raised = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    monkeypatch.setattr(sys, "stdout", Unwritable())
    watch = tensorflow_server._StopWatch(Gone())
    ended = []
    waiter = threading.Thread(target=lambda: ended.append(watch.wait()), daemon=True)
    waiter.start()
    waiter.join(30)
    assert ended == [0]
    watch.reader.join(30)
    assert not watch.reader.is_alive() and raised == []


def test_a_fine_grained_task_told_to_stop_while_tensorflow_loads_starts_no_server(
        stalling_rdv, monkeypatch):
    from tfmesos.task import tensorflow_server
    watches = []

    class Watch(tensorflow_server._StopWatch):
        def __init__(self, conn):
            super().__init__(conn)
            watches.append(self)

    @contextlib.contextmanager
    def loading(level, gpus=None):   # TensorFlow loads until the stop was read
        wait_until(lambda: watches and watches[0].done(), timeout=30)
        yield

    monkeypatch.setattr(tensorflow_server, "_StopWatch", Watch)
    monkeypatch.setattr(tensorflow_server, "tensorflow_startup_filtered", loading)
    task = FineGrainedTask(stalling_rdv, monkeypatch)
    try:
        assert stalling_rdv.send("good", {"type": "stop"})
        task.thread.start()
        task.thread.join(30)
        assert task.outcome == [0] and not task.started.is_set()
    finally:
        task.close()


def test_a_fine_grained_task_whose_reading_breaks_fails(stalling_rdv, monkeypatch):
    """Not a lost scheduler (which ends the task with 0, as a stop does): a
    bug in reading ends the task with that error, not with a success."""
    task = FineGrainedTask(stalling_rdv, monkeypatch)

    def broken_receive():
        task.started.wait(30)
        raise RuntimeError("a bug in reading")

    monkeypatch.setattr(task.conn, "receive", broken_receive)
    try:
        task.thread.start()
        assert task.started.wait(30)
        task.release.set()
        task.thread.join(30)
        assert [repr(outcome) for outcome in task.outcome] == [
            repr(RuntimeError("a bug in reading"))]
    finally:
        task.close()


@pytest.mark.waits
def test_a_task_that_hears_nothing_registers_again_or_ends_by_itself(monkeypatch):
    # A scheduler that never pings: as a partitioned one looks from the task.
    rdv = make_rendezvous(ping_interval=3600.0)
    rdv.expect("good")
    monkeypatch.setattr(task_connection, "IDLE_TIMEOUT", 0.5)
    monkeypatch.setattr(task_connection, "REREGISTER_GRACE", 1.0)
    conn = Connection(task_env(rdv))
    try:
        conn.register("h", 2222)
        assert next_event(rdv, TaskRegistered).task_id == "good"
        receiver = Receiver(conn)
        assert next_event(rdv, TaskDisconnected) == TaskDisconnected("good")
        assert next_event(rdv, TaskRegistered).task_id == "good"   # and it goes on
        assert not receiver.ended.is_set()
        refuse_as_unknown(rdv, "good")   # the next silence is not followed by a welcome
        assert receiver.ended.wait(10), "the task did not end by itself"
        assert "cannot register" in str(receiver.error)
    finally:
        conn.close()
        rdv.close()
