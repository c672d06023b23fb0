"""tfrun's words for the fields of a run: the flag that sets each field an
error may name (``error_fields.FIELDS``), and ``in_flags``, which every
error tfrun prints goes through (issue 32: errors in the caller's words)."""

from typing import TYPE_CHECKING

from ..exceptions import TFMesosError

if TYPE_CHECKING:   # imported by tfrun once an error is: nothing more
    from ..error_fields import Word

# The flags of a job's resources: -Cw, -Ms, ...; the evaluator has the workers'.
_LETTERS = {"worker": "w", "ps": "s", "chief": "c", "evaluator": "w"}
_COUNTS = {"worker": "-w", "ps": "-s", "chief": "-c", "evaluator": "--evaluator"}


def job_flag(field, prefix, slots):
    """The words of a job's ``field`` (``cpus``): its own flag (``prefix``
    and the job's letter: -Cw) and ``--job NAME:...``, whose part ``slots``
    (``COUNT:CPUS``) sets it; the spec's name first, as ``--job`` spells
    its parts."""
    def word(context, value):
        job = context.get("job") or "NAME"
        flag = _COUNTS.get(job) if prefix is None else (
            prefix + _LETTERS[job] if job in _LETTERS else None)
        named = field if value is None else "%s=%s" % (field, value)
        via = "--job %s:%s" % (job, slots)
        return "%s (%s or %s)" % (named, flag, via) if flag else "%s (%s)" % (named, via)
    return word


FLAGS: "dict[str, Word]" = {
    "name": "-n",
    "master": "-m",
    "image": "-I",
    "containerizer": "-C",
    "force_pull": "-f",
    "env": "-E",
    "secret_env": "--secret-env",
    "volumes": "-V",
    "run_dir": "--run-dir",
    "python": "--python",
    "user": "-u",
    "local_master": "the embedded master's options",   # no one flag sets them all
    "ca_bundle": "--ca-bundle",
    "master_scheme": "--master-scheme",
    # --no-verify sets verify=False, the one value a flag gives it
    "verify": lambda context, value: "--no-verify" if value in (None, "False")
    else "verify=%s" % value,
    "advertise_address": "--advertise-address",
    "launch_timeout": "--launch-timeout",
    "connect_timeout": "--connect-timeout",
    "refused_timeout": "--connect-timeout",   # it is the connect timeout, when one is given
    "reconnect_grace": "reconnect_grace",     # no flag sets it
    "max_attempts": "--max-attempts",
    "failover_timeout": "--failover-timeout",
    "sticky_jobs": "--sticky-workers",
    "sticky_timeout": "--sticky-timeout",
    "mlflow": "--mlflow",
    # --torch, --jax; "tensorflow" is neither (no error names that value)
    "framework": lambda context, value: "--torch or --jax" if value is None else "--" + value,
    "nproc_per_task": "--nproc-per-task",
    "elastic": "--torch-elastic",
    "jobs": "-w, -s, -c or --job",
    "jobs.chief": "-c",
    "job.num": job_flag("num", None, "COUNT"),
    "job.start": "start",                     # no flag sets them
    "job.cmd": "cmd",
    "job.cpus": job_flag("cpus", "-C", "COUNT:CPUS"),
    "job.mem": job_flag("mem", "-M", "COUNT:CPUS:MEM"),
    "job.gpus": job_flag("gpus", "-G", "COUNT:CPUS:MEM:GPUS"),
    "restart_policy.max_restarts": "--max-restarts",
    "restart_policy.restart_on": "--restart-on",
    "restart_policy.backoff": "--restart-backoff",
    "restart_policy.max_backoff": "max_backoff",   # no flag sets it
    "local_master.cgroups_enable_cfs": "--cgroups-enable-cfs",
    "ship.directory": "--ship",
    "ship.max_size": "--ship-max-size",
    "ship.exclude": "--ship-exclude PATTERN",
    "ship.follow_links": "--ship-follow-links",
    "ship.allow_secrets": "--ship-allow-secrets",
    "ship.python_env": "--python-env",
}


def in_flags(error):
    """``error`` naming tfrun's flags (``FLAGS``) where it names fields."""
    return error.in_words(FLAGS) if isinstance(error, TFMesosError) else error


__all__ = ["FLAGS", "in_flags", "job_flag"]
