"""What tfrun checks of a ``RunSpec`` before anything starts, as usage
errors (SpecError): what a run would otherwise find wrong only once
started."""

import contextlib
import os

from ..core import config
from ..core.spec import AUTO
from ..exceptions import SpecError, TFMesosError


def check_before_start(spec, environ):
    """What a run would find wrong only once started, as usage errors
    (SpecError): more tasks than the open files this process may have
    (``open_files.too_few``), a given advertise address the backend would refuse, a
    ``$DOCKER_HOST`` the embedded master's Docker runner could not read,
    a ``--secret-env`` variable that is not set, a keys directory another
    user could swap a ``--failover`` or ``--detach`` run's key in, or one
    its key cannot be written to (``takeover_files.check_keys_writable``),
    a runs directory another user could redirect the run's record from
    (``run_dirs.check_runs_dir``), a ``--run-dir`` that cannot be made
    (made last, once all else passed)."""
    from ..core.task_secrets import values
    values(spec, environ)
    from ..core.local_python import check_local_python
    check_local_python(spec, environ)
    from ..core import open_files
    open_files.check(sum(job.num for job in spec.jobs))
    if spec.advertise_address or (spec.master != config.LOCAL
                                  and environ.get("TFMESOS_ADVERTISE_ADDRESS")):
        from ..core.run_setup import make_backend
        backend = make_backend(spec, environ)
        try:
            backend.check()
        except TFMesosError as exc:
            raise SpecError.like(exc) from None
    if spec.image and spec.master == config.LOCAL:
        from mesos_local import docker_host_error
        why = docker_host_error(environ)
        if why:
            raise SpecError(why)
    if spec.failover_timeout is not None:   # --failover, --detach: the run's key is kept
        from ..record.takeover_files import TakeoverError, check_keys_writable
        try:   # a run nobody can attach is none: refused before it launches
            check_keys_writable(environ)
        except TakeoverError as exc:
            raise SpecError(str(exc)) from None
    if spec.run_dir is None:
        return
    # not at import: --help needs none
    from ..record.run_dirs import UnsafeRunDir, check_runs_dir, make_run_dir, runs_root
    try:
        if spec.run_dir == AUTO:
            check_runs_dir(runs_root(environ))
        elif make_run_dir(spec.run_dir):
            # Made to see that it can be; made again by the run's record,
            # which then knows it made it: a run refused before anything ran
            # (a --ship refused) takes it away again.
            with contextlib.suppress(OSError):
                os.rmdir(spec.run_dir)
    except UnsafeRunDir as exc:
        raise SpecError("%s: use a directory of your own (--run-dir, $TFMESOS_RUNS_DIR)"
                        % exc) from None
    except OSError as exc:
        raise SpecError("--run-dir %s: cannot %s (%s): give a directory you can write"
                        % (spec.run_dir, "write there" if os.path.isdir(spec.run_dir)
                           else "create it", exc.strerror or exc)) from None
