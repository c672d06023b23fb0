"""One deadline per HTTP request, kept by one thread for the whole server.

A per-read socket timeout does not bound a request: a client that sends a
byte every few seconds never trips it and holds its handler thread for as
long as it likes. Here each connection's handler arms a deadline when it
starts waiting for a request (request line, headers and body together) and
disarms it once the whole request is in. A deadline that passes first ends
the connection: ``reply`` (a 408, or nothing for an idle kept-alive
connection) is written without blocking and the socket is shut down, which
wakes the handler's blocked read with end-of-file.
"""

import socket
import threading
import time


class Deadlines:
    def __init__(self):
        self._due = {}            # key -> (monotonic deadline, socket, reply bytes)
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = None

    def start(self):
        thread = threading.Thread(target=self._watch, daemon=True,
                                  name="local-master-http-deadlines")
        thread.start()   # RuntimeError where no thread is to be had: none to join then
        self._thread = thread

    def stop(self):
        with self._wake:
            self._stopped = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(5)

    def arm(self, key, sock, seconds, reply=b""):
        with self._wake:
            self._due[key] = (time.monotonic() + seconds, sock, reply)
            self._wake.notify()

    def disarm(self, key):
        """Whether ``key``'s deadline had not passed (False: its connection
        is being ended and the request must not be answered)."""
        with self._wake:
            return self._due.pop(key, None) is not None

    def _watch(self):
        while True:
            with self._wake:
                if self._stopped:
                    return
                now = time.monotonic()
                passed = [key for key, (due, _, _) in self._due.items() if due <= now]
                ended = [self._due.pop(key) for key in passed]
                if not ended:
                    soonest = min((due for due, _, _ in self._due.values()), default=None)
                    self._wake.wait(None if soonest is None else soonest - now)
                    continue
            for _, sock, reply in ended:
                end_connection(sock, reply)


def end_connection(sock, reply=b""):
    """Write ``reply`` if the socket takes it at once, then shut it down."""
    if reply:
        try:
            sock.send(reply, socket.MSG_DONTWAIT)
        except OSError:
            pass
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
