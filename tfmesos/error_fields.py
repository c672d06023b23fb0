"""The fields of a run that an error may name, and naming them in a caller's
words (issue 32: errors in the caller's words).

An error about what a caller gave names the ``RunSpec`` field it is about
(``{launch_timeout}``, ``{ship.max_size}``, ``{job.mem}``) in its template,
never a command-line flag or a keyword argument: tfrun sets
``launch_timeout`` with ``--launch-timeout``, ``cluster()`` and
``tfmesos.run()`` with ``launch_timeout=``. Each caller keeps its words for
every field of ``FIELDS`` in one table beside it (tfrun's
``cli/tfrun_flags.FLAGS``, ``cluster()``'s ``cluster_arguments.KEYWORDS``,
``tfmesos.run()``'s ``function_options.KEYWORDS``) and words its errors at one
boundary (``TFMesosError.in_words``); anyone else reads ``FIELDS``' own
words, the spec's (``ship.max_size``, a job's ``mem``).

In a template (``TFMesosError.about``):

* ``{field}`` is how the caller names the field: ``--ship-max-size``,
  ``ship_max_size``;
* ``{field=VALUE}`` how the caller sets it to VALUE (a %-slot, often):
  ``--ship-max-size 100 MB``, ``ship_max_size=100 MB``; a flag of a yes/no
  field set to True is the flag alone.

The fields are worded first, then the template is %-formatted with the
error's values: a value (a path, a name the user gave) is never read as a
field. A table's word is a string, or a function of the error's context
(``job``: the name of the job a ``job.*`` field is of) and of the value
(None for ``{field}``).
"""

import re
from collections.abc import Callable, Mapping
from typing import Any, Optional, Union

Word = Union[str, Callable[[Mapping[str, Any], Optional[str]], str]]

# Each field an error may name, with the spec's own words for it: the
# attribute of ``RunSpec`` (``core.spec``), of its ``ship`` (``ship.bundle.
# ShipSpec``), ``restart_policy`` (``core.restarts.RestartPolicy``) or
# ``local_master`` options, or of a ``Job`` (``job.*``, with the job's name
# as context).
FIELDS: "dict[str, str]" = {
    "name": "name",
    "master": "master",
    "image": "image",
    "containerizer": "containerizer",
    "force_pull": "force_pull",
    "env": "env",
    "secret_env": "secret_env",
    "volumes": "volumes",
    "local_master": "local_master",
    "run_dir": "run_dir",
    "python": "python",
    "user": "user",
    "ca_bundle": "ca_bundle",
    "master_scheme": "master_scheme",
    "verify": "verify",
    "advertise_address": "advertise_address",
    "launch_timeout": "launch_timeout",
    "connect_timeout": "connect_timeout",
    "refused_timeout": "refused_timeout",
    "reconnect_grace": "reconnect_grace",
    "max_attempts": "max_attempts",
    "failover_timeout": "failover_timeout",
    "sticky_jobs": "sticky_jobs",
    "sticky_timeout": "sticky_timeout",
    "mlflow": "mlflow",
    "framework": "framework",
    "nproc_per_task": "nproc_per_task",
    "elastic": "elastic",
    "jobs": "jobs",
    "jobs.chief": "a 'chief' job",       # the run's jobs: one named chief
    "job.num": "num",
    "job.start": "start",
    "job.cpus": "cpus",
    "job.mem": "mem",
    "job.gpus": "gpus",
    "job.cmd": "cmd",
    "restart_policy.max_restarts": "restart_policy.max_restarts",
    "restart_policy.restart_on": "restart_policy.restart_on",
    "restart_policy.backoff": "restart_policy.backoff",
    "restart_policy.max_backoff": "restart_policy.max_backoff",
    "local_master.cgroups_enable_cfs": "local_master.cgroups_enable_cfs",
    "ship.directory": "ship.directory",
    "ship.max_size": "ship.max_size",
    "ship.exclude": "ship.exclude",
    "ship.follow_links": "ship.follow_links",
    "ship.allow_secrets": "ship.allow_secrets",
    "ship.python_env": "ship.python_env",
}

_PLACEHOLDER = re.compile(r"\{([a-z][a-z_]*(?:\.[a-z][a-z_]*)?)(?:=([^{}]*))?\}")


def fields_of(template: str) -> tuple:
    """The fields ``template`` names, in order, each once."""
    return tuple(dict.fromkeys(match.group(1) for match in _PLACEHOLDER.finditer(template)))


def check(template: str) -> None:
    """ValueError (a bug of tfmesos) when ``template`` names a field that is
    not in ``FIELDS``: no caller's table would have words for it."""
    unknown = [field for field in fields_of(template) if field not in FIELDS]
    if unknown:
        raise ValueError("an error's template names %s, not in tfmesos.error_fields.FIELDS: %r"
                         % (", ".join(unknown), template))


def words(changes: Mapping[str, Word]) -> "dict[str, Word]":
    """A caller's table: ``FIELDS``' own words (the spec's names, which
    ``cluster()``'s and ``tfmesos.run()``'s keyword arguments mostly are)
    with ``changes`` where the caller says a field otherwise. ValueError
    (a bug of tfmesos) for a change of a field ``FIELDS`` does not have."""
    unknown = sorted(set(changes) - set(FIELDS))
    if unknown:
        raise ValueError("words for fields not in tfmesos.error_fields.FIELDS: %s"
                         % ", ".join(unknown))
    table: dict[str, Word] = dict(FIELDS)
    table.update(changes)
    return table


def set_to(word: str, value: str) -> str:
    """How ``word`` (a flag, or a keyword) sets a field to ``value``."""
    if word.startswith("-"):
        return word if value == "True" else "%s %s" % (word, value)
    return "%s=%s" % (word, value)


def render(template: str, values: tuple, context: Mapping[str, Any],
           words: Optional[Mapping[str, Word]] = None) -> str:
    """``template``'s message: its fields in ``words`` (default: the spec's,
    ``FIELDS``), then %-formatted with ``values``."""
    table: Mapping[str, Word] = FIELDS if words is None else words

    def worded(match: "re.Match[str]") -> str:
        field, value = match.group(1), match.group(2)
        word = table[field] if field in table else FIELDS.get(field, field)
        if callable(word):
            return word(context, value)
        return word if value is None else set_to(word, value)

    return _PLACEHOLDER.sub(worded, template) % tuple(values)


__all__ = ["FIELDS", "Word", "check", "fields_of", "render", "set_to", "words"]
