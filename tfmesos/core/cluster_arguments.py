"""What ``cluster()``'s arguments become (``fine_grained`` runs them): the
run's ``RunSpec`` (``run_spec_of``), cluster()'s words for its fields in
errors (``KEYWORDS``, ``in_keywords``), and what this process can run of
it (``check_local``, which ``tfmesos.run`` asks too)."""

import os
from collections.abc import Iterable, Mapping
from typing import Any, Optional, TypeVar, Union

from ..error_fields import Word, words
from ..exceptions import SpecError, TFMesosError
from . import config
from .caller import cluster_command, script_name
from .jobs import JobsGiven, parse_jobs
from .restarts import RestartPolicy
from .spec import AUTO, STICKY_TIMEOUT, RunSpec
from .spec_fields import local_master_pairs, user_env, volumes_given

_E = TypeVar("_E", bound=BaseException)


# cluster()'s words for the fields of a run (``error_fields``): its keyword
# arguments, named as the spec's fields but for these (``reconnect_grace``,
# ``failover_timeout``: no keyword sets them); a job's fields are the keys
# of its ``Job`` or dict; what it ships, a directory or a ``ShipSpec``.
KEYWORDS: "dict[str, Word]" = words({
    "containerizer": "containerizer_type",
    "force_pull": "force_pull_image",
    "refused_timeout": "connect_timeout",   # it is the connect timeout, when one is given
    "sticky_jobs": "coordinator",           # coordinator=True makes the workers sticky
    "jobs.chief": "a 'chief' job (or coordinator=True)",
    "restart_policy.max_restarts": "max_restarts",
    "restart_policy.restart_on": "restart_on",
    "restart_policy.backoff": "restart_backoff",
    "restart_policy.max_backoff": "max_backoff",   # no keyword sets it
    "local_master": "local_master_options",
    "local_master.cgroups_enable_cfs": "local_master_options['cgroups_enable_cfs']",
    "ship.directory": "ship",
    "ship.max_size": "ShipSpec.max_size",
    "ship.exclude": "ShipSpec(exclude=[PATTERN, ...])",
    "ship.follow_links": "ShipSpec.follow_links",
    "ship.allow_secrets": "ShipSpec.allow_secrets",
    "ship.python_env": "ShipSpec.python_env",
})


def in_keywords(error: _E) -> _E:
    """``error`` naming cluster()'s keyword arguments (``KEYWORDS``) where
    it names fields."""
    return error.in_words(KEYWORDS) if isinstance(error, TFMesosError) else error


# cluster()'s volumes: ``host:container[:ro|rw]`` strings, or {host: container}.
Volumes = Union[Iterable[str], Mapping[str, str], None]


def check_local(spec: RunSpec) -> None:
    """SpecError for what this process cannot run of ``spec``: more tasks
    than its hard open-files limit allows (``open_files.too_few``; they
    failed to start, relaunched, and the run ended in EMFILE), and what the
    embedded master sized for it never can here (``sizing.check_local``:
    too many tasks, a task larger than the machine); asked before anything
    is built, as tfrun asks it (cluster(), run(), submit()); given agents
    (``local_master_options``) are the caller's to size. On the embedded
    master, the plain tasks' ``python`` must be on this machine
    (``local_python``: tfrun's --python check). Settings that would do
    nothing for ``spec`` are refused as tfrun refuses its flags for them
    (``unused_settings``)."""
    from . import open_files, unused_settings

    unused_settings.check(spec)

    open_files.check(sum(job.num for job in spec.jobs))
    from .local_python import check_local_python
    check_local_python(spec, os.environ)
    options = spec.local_master_options
    if spec.master == config.LOCAL and "agents" not in options:
        from ..backends.sizing import check_local as check
        check(spec.jobs, options)
    if spec.master == config.LOCAL:   # as tfrun -u: before anything starts
        from .local_python import check_local_user
        check_local_user(spec)


def run_spec_of(jobs: JobsGiven, master: Optional[str] = None, name: Optional[str] = None,
                volumes: Volumes = None, env: Optional[Mapping[str, str]] = None,
                role: Optional[str] = None, containerizer_type: Optional[str] = None,
                force_pull_image: bool = False, image: Optional[str] = None,
                local_master_options: Optional[Mapping[str, Any]] = None,
                coordinator: bool = False, run_dir: Optional[str] = None, max_restarts: int = 0,
                restart_on: str = "lost", restart_backoff: float = 2.0,
                sticky_timeout: float = STICKY_TIMEOUT,
                environ: Optional[Mapping[str, str]] = None, **settings: Any) -> RunSpec:
    """The ``RunSpec`` of ``cluster()``'s arguments (``settings``: the
    RunSpec fields of the same name)."""
    environ = os.environ if environ is None else environ
    jobs = parse_jobs(jobs)
    for job in jobs:
        if job.start:
            # The servers' cluster spec lists each job's addresses from
            # index 0: a server told task start+i is not in it, and fails.
            raise SpecError("job %r: start=%d: cluster() numbers each job's tasks from 0 "
                            "(/job:%s/task:0): drop start" % (job.name, job.start, job.name))
    return RunSpec(
        # Unnamed: after the script that made it (core.caller), as tfrun names its runs.
        name=name or script_name(), shown_command=cluster_command(jobs), role=role,
        image=config.resolve(image, environ, "DOCKER_IMAGE"),
        containerizer=containerizer_type or "MESOS", force_pull=force_pull_image,
        # host:container[:mode] strings, which RunSpec parses (its __post_init__)
        volumes=volumes_given(volumes), env=tuple(user_env(env)), jobs=tuple(jobs),
        mode="fine", master=config.resolve_master(master, environ), coordinator=coordinator,
        local_master=local_master_pairs(local_master_options), run_dir=run_dir or AUTO,
        restart_policy=RestartPolicy(max_restarts, restart_on, restart_backoff),
        sticky_jobs=("worker",) if coordinator and any(j.name == "worker" for j in jobs) else (),
        sticky_timeout=sticky_timeout, **settings)
