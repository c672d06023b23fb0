"""``tfrun --tensorboard LOGDIR``: TensorBoard as one more task of the run —
on the cluster, next to the data the job writes — stopped with the run, its
URL printed once it answers."""

import shlex
import sys
import threading
import time

from ..core.jobs import HELPER_JOBS, Job

JOB = HELPER_JOBS[0]   # the one helper job: a run goes on without it (core.reactions)


# tensorboard.main as python -m runs it, but for the working directory first on
# sys.path (python -m puts it there; -P does only from Python 3.11): the
# directory tfrun ran from holds the user's modules (a cmd.py shadowed the
# standard library's, which TensorBoard imports).
RUN_TENSORBOARD = ("import runpy, sys; sys.path.pop(0); sys.argv[0] = 'tensorboard'; "
                   "runpy.run_module('tensorboard.main', run_name='__main__', alter_sys=True)")


def tensorboard_job(logdir, image=None, python=None, cpus=0.5, mem=1536):
    """The job running TensorBoard on ``logdir`` (a path the agents see) at
    the task's own address, the one tfrun prints (``url_of``): it listens on
    that host only (TensorBoard has no authentication: with the embedded
    master that is loopback, 127.0.0.1) and on the port Mesos offered the
    task."""
    interpreter = "python3" if image else shlex.quote(python or sys.executable)
    logdir = shlex.quote(logdir).replace("{", "{{").replace("}", "}}")
    # {tensorboard_hosts} is this task's host:port (an IPv6 host in
    # brackets, which --host takes without); ${address##*:} its port.
    # --logdir=PATH: a PATH that starts with - is no option of TensorBoard's.
    run = shlex.quote(RUN_TENSORBOARD).replace("{", "{{").replace("}", "}}")
    cmd = ("address={tensorboard_hosts}; host=${{address%%:*}}; host=${{host#\\[}}; "
           "host=${{host%%\\]}}; exec %s -c %s --logdir=%s "
           "--host \"$host\" --port ${{address##*:}}" % (interpreter, run, logdir))
    return Job(JOB, num=1, cpus=cpus, mem=mem, cmd=cmd)


def url_of(spec):
    """TensorBoard's URL in a cluster spec, or None."""
    addresses = spec.get(JOB) or []
    return "http://%s/" % addresses[0] if addresses else None


def announce_when_up(url, say, timeout=180.0, interval=0.5, stopped=None):
    """In a daemon thread: poll ``url`` and ``say`` it once TensorBoard
    answers (it starts in seconds, importing TensorFlow); say so if it has
    not answered after ``timeout``. ``stopped`` (an Event) ends the wait."""
    import urllib.error  # only runs with TensorBoard poll it
    import urllib.request

    stopped = stopped or threading.Event()

    def poll():
        deadline = time.monotonic() + timeout
        while not stopped.is_set() and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=2):
                    say("TensorBoard at %s" % url)
                    return
            except (urllib.error.URLError, OSError):
                stopped.wait(interval)
        if not stopped.is_set():
            say("TensorBoard did not answer at %s within %.0f s (its output is in the run "
                "directory)" % (url, timeout))
    thread = threading.Thread(target=poll, name="tensorboard-url", daemon=True)
    thread.start()
    return stopped
