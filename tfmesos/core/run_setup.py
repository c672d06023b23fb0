"""What a ``ClusterRun`` is made of besides its own parts: where its master
lives (``make_backend``: also what tfrun checks before a run starts) and its
record (``make_record``, the run directory's ``RunRecord``)."""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional

from ..mesos.master_address import without_password
from ..record import schema
from ..record.run_dirs import default_run_dir
from ..record.run_record import RunRecord
from . import config
from .spec import AUTO, RunSpec
from .taskinfo import another_user, warm_task_command

if TYPE_CHECKING:
    from ..backends import Backend
    from ..backends.warm_runner import WarmProcessRunner
    from .identity import RunIdentity
    from .slots import SlotTable


def make_backend(spec: RunSpec, environ: Mapping[str, str],
                 warm_runner: Optional["WarmProcessRunner"] = None) -> "Backend":
    """Where the run of ``spec`` goes: the embedded master (``--master
    local``; ``warm_runner``, started by tfrun, else one started with the
    master), or the remote master ``spec.master``."""
    if spec.master != config.LOCAL:
        from ..backends.remote import RemoteMaster
        if warm_runner is not None:
            warm_runner.close()
        return RemoteMaster(spec.master, spec.advertise_address, environ)
    from ..backends.embedded import EmbeddedMaster
    from ..backends.warm_runner import start_warm_runner
    options = spec.local_master_options
    if another_user(spec.user) and "executor_environment" not in options:
        # Not the submitter's credentials or HOME for another user's tasks.
        from ..backends.task_user import environment_for_another_user
        options = dict(options, executor_environment=environment_for_another_user(environ))
    return EmbeddedMaster(spec.jobs, containers=bool(spec.image),
                          options=options, advertise=spec.advertise_address,
                          environ=environ, runner=warm_runner,
                          make_runner=lambda: start_warm_runner(warm_task_command(spec)))


def make_record(spec: RunSpec, identity: "RunIdentity", slots: "SlotTable",
                environ: Mapping[str, str]) -> RunRecord:
    """The record of the run of ``spec`` as ``identity``, whose tasks are
    ``slots``: in ``spec.run_dir`` (``AUTO``: the default directory, made
    anew), or in memory only (None)."""
    run_dir = spec.run_dir
    if run_dir == AUTO:
        run_dir = default_run_dir(spec.name, identity.run_id, environ)
    header = schema.RunFile(
        run_id=identity.run_id, name=spec.name, mode=spec.mode, framework=spec.framework,
        elastic=None if spec.elastic is None else "%d:%d" % spec.elastic,
        master=without_password(spec.master),
        command=spec.recorded_command,
        jobs=[schema.Job(name=j.name, num=j.num, start=j.start, cpus=j.cpus, mem=j.mem,
                         gpus=j.gpus) for j in spec.jobs])
    return RunRecord(run_dir, header, slots, forwarding=spec.mode == "replica",
                     new_directory=spec.run_dir == AUTO)
