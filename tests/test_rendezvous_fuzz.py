"""10,000 random, mutated and replayed frames against a live run's
rendezvous: every one is refused, and the run is not disturbed."""

import random
import socket
import struct
import threading
import time

from rendezvous_client import Client, replica_run, stop

from tfmesos.core import runtime
from tfmesos.core.rendezvous import Rendezvous
from tfmesos.protocol import wire

FRAMES = 10_000
THREADS = 4


def mutate(rng, frame):
    """A copy of ``frame`` that differs: a bit flip, a truncation or another length."""
    data = bytearray(frame)
    kind = rng.randrange(3)
    if kind == 0:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        del data[rng.randrange(len(data)):]
    else:
        length = rng.choice([0, 1, wire.MAC_SIZE + 1, len(frame) - 5, len(frame) - 3,
                             rng.randrange(1 << 32)])
        data[:4] = struct.pack("!I", length if length != len(frame) - 4 else length + 1)
    return bytes(data)


class Fuzzer:
    """One client thread: each episode is a connection that ends with one bad
    frame, before or after a (valid) registration as ``task_id``."""

    def __init__(self, port, secret, task_id, seed, real_ids, count):
        self.port, self.secret, self.task_id = port, secret, task_id
        self.rng = random.Random(seed)
        self.real_ids = real_ids      # the run's task ids, once launched
        self.count = count
        self.sent = 0
        self.closed_by_server = 0
        self.captured = []            # valid frames seen on earlier connections
        self.error = None
        self.timed_out = 0
        self.answered = 0

    def run(self):
        try:
            while self.sent < self.count:
                if self.rng.random() < 0.3:
                    self.registered_episode()
                else:
                    self.unregistered_episode()
        except Exception as exc:  # reported by the test
            self.error = exc

    def registration(self, channel, task_id=None):
        return channel.seal({"type": "register", "task_id": task_id or self.task_id,
                             "host": "127.0.0.1", "port": 1})

    def unregistered_episode(self):
        client = Client(self.port, self.secret)
        try:
            channel = client.challenge()
            ids = list(self.real_ids()) or ["nobody"]
            choice = self.rng.randrange(6)
            if choice == 0:
                frame = self.rng.randbytes(self.rng.randrange(120))
            elif choice == 1:
                size = self.rng.randrange(wire.SMALL_FRAME + 2)
                frame = struct.pack("!I", size) + self.rng.randbytes(min(size, 300))
            elif choice == 2:  # a registration of a real task, changed
                frame = mutate(self.rng, self.registration(channel, self.rng.choice(ids)))
            elif choice == 3 and self.captured:  # replayed from another connection
                frame = self.rng.choice(self.captured)
            elif choice == 4:  # authentic, but not a task of the run
                frame = self.registration(channel, "stranger-%d" % self.rng.randrange(9))
            else:  # authentic, malformed
                frame = channel.seal({"type": "register", "task_id": ids[0], "port": "x"})
            if self.finish(client, frame):
                self.answered += 1  # registered: a frame got in
        finally:
            client.close()

    def registered_episode(self):
        client = Client(self.port, self.secret)
        try:
            frame = client.register(self.task_id)
            client.registered()
            self.captured.append(frame)
            for _ in range(self.rng.randrange(3)):
                self.captured.append(client.send({"type": "log", "stream": "stdout",
                                                  "data": "fuzz\n"}))
            self.finish(client, self.bad_frame(client))
        finally:
            client.close()

    def bad_frame(self, client):
        choice = self.rng.randrange(5)
        channel = client.channel
        if choice == 0:
            return mutate(self.rng, channel.seal({"type": "exit", "code": 1}))
        if choice == 1:
            return self.rng.choice(self.captured)  # replayed (here or elsewhere)
        if choice == 2:
            channel.sent += 1 + self.rng.randrange(3)  # skips a sequence number
            return channel.seal({"type": "exit", "code": 2})
        if choice == 3:
            return struct.pack("!I", wire.MAX_FRAME + 1 + self.rng.randrange(99)) + b"x" * 64
        return self.rng.randbytes(1 + self.rng.randrange(200))

    def finish(self, client, frame):
        """Send the bad frame, half-close, and wait (bounded) for the server
        to close; returns how many bytes it answered."""
        self.sent += 1
        answer = 0
        try:
            client.sock.sendall(frame)
            client.sock.shutdown(socket.SHUT_WR)
            client.sock.settimeout(5)
            while True:
                data = client.sock.recv(65536)
                if not data:
                    break
                answer += len(data)
            self.closed_by_server += 1
        except socket.timeout:
            self.timed_out += 1
        except OSError:  # reset, broken pipe, not connected: closed by the server
            self.closed_by_server += 1
        return answer


def release_when_done(threads, path):
    """Let the run's commands end once the fuzzing is over."""
    for thread in threads:
        thread.join(50)
    path.write_text("")


def test_fuzzed_frames_neither_get_in_nor_disturb_a_run(monkeypatch, tmp_path):
    go_on = tmp_path / "fuzz-done"
    logs = []
    command = ("echo up {job_name}; for i in $(seq 600); do [ -e %s ] && break; sleep 0.1; done; "
               "echo done {job_name}" % go_on)
    fuzzers, threads = [], []

    def fuzzed_rendezvous(secret, *args, **kwargs):
        server = Rendezvous(secret, *args, **kwargs)
        for n in range(THREADS):
            server.expect("fuzz-%d" % n)
            fuzzers.append(Fuzzer(server.port, secret, "fuzz-%d" % n, n, real_ids,
                                  FRAMES // THREADS))
            threads.append(threading.Thread(target=fuzzers[-1].run, daemon=True))
            threads[-1].start()
        return server

    monkeypatch.setattr(runtime, "Rendezvous", fuzzed_rendezvous)
    run = replica_run(command, on_log=lambda slot, stream, text: logs.append(text),
                      forward_logs=lambda slot: True)
    def real_ids():
        return [slot.task_id for slot in run.slots if slot.task_id]
    started = time.monotonic()
    try:
        run.start()
        run.wait_ready()
        threading.Thread(target=release_when_done, args=(threads, go_on), daemon=True).start()
        assert run.wait_finished() == 0   # handling every event meanwhile
    finally:
        go_on.write_text("")
        stop(run)
    assert time.monotonic() - started < 50
    assert not any(thread.is_alive() for thread in threads)
    assert [f.error for f in fuzzers] == [None] * THREADS
    assert sum(f.sent for f in fuzzers) == FRAMES
    assert sum(f.timed_out for f in fuzzers) == 0
    assert sum(f.answered for f in fuzzers) == 0
    assert sum(f.closed_by_server for f in fuzzers) == FRAMES
    assert sorted(text for text in logs if "worker" in text) == \
        ["done worker\n", "done worker\n", "up worker\n", "up worker\n"]
