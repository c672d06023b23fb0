"""Signals a process gets on a thread other than its main one."""

import contextlib
import signal
import threading


@contextlib.contextmanager
def sigterm_to_another_thread(handler, after=0.2):
    """``handler`` as SIGTERM's handler, and a SIGTERM ``after`` seconds from
    now to a thread other than the main one, as the kernel may deliver a
    process' signal to any thread that does not block it: Python runs the
    handler in the main thread only once that thread runs again."""
    previous = signal.signal(signal.SIGTERM, handler)
    done = threading.Event()
    receiver = threading.Thread(target=done.wait, args=(60,), daemon=True)
    receiver.start()   # alive until the block ends: the signal finds it however late
    timer = threading.Timer(after, signal.pthread_kill, (receiver.ident, signal.SIGTERM))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        done.set()
        signal.signal(signal.SIGTERM, previous)
