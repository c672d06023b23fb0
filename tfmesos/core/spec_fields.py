"""RunSpec's fields as given to their normal form, each checked on the way
(``spec.RunSpec.__post_init__``): environment pairs, secret variable
names, volumes."""

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Optional, Union

from ..exceptions import SpecError
from .inputs import ENV_NAME
from .volumes import parse_volume


def env_tuple(env: Union[Mapping[str, object], Iterable[Union[str, Sequence[object]]]],
               job: Optional[str] = None) -> tuple[tuple[str, str], ...]:
    """The run's ``env`` (a job's: ``job``, its name) as (name, value) pairs."""
    owner = "the run" if job is None else "job %r" % job
    items = env.items() if isinstance(env, dict) else env
    result = []
    for item in items:
        if isinstance(item, str):
            if "=" not in item:
                raise SpecError("%s: environment entry %r must look like NAME=VALUE" % (owner, item))
            item = item.split("=", 1)
        name, value = item
        if not ENV_NAME.match(str(name)):
            raise SpecError("%s: invalid environment variable name %r: use letters, digits and "
                            "_, not first a digit" % (owner, name))
        if not isinstance(value, str):
            fix = ("leave %s out to leave it unset" % name if value is None
                   else "give %r" % str(value))
            what = ": the value of %s must be a string, got %r (%s)"
            if job is None:
                raise SpecError.about("{env}" + what, name, value, fix)
            raise SpecError.about("job %r: env" + what, job, name, value, fix)
        result.append((str(name), str(value)))
    return tuple(result)


def pairs(value: Any) -> tuple:
    """``(name, value)`` pairs of a mapping, or of pairs given as such (None: none)."""
    if value is None:
        return ()
    return tuple(value.items()) if isinstance(value, dict) else tuple(value)


def secret_names(names: Union[str, Iterable[str]], plain: Collection[str]) -> tuple[str, ...]:
    """``secret_env``: distinct variable names, none of them also a plain
    setting (``plain``) nor one tfmesos sets itself."""
    if isinstance(names, str):
        names = (names,)
    result = []
    for name in names:
        if not isinstance(name, str) or not ENV_NAME.match(name):
            raise SpecError.about("{secret_env}: invalid environment variable name %r: use "
                                  "letters, digits and _, not first a digit", name)
        if name.startswith(("TFMESOS_", "MESOS_")):
            raise SpecError.about("{secret_env}: %s is a name tfmesos or Mesos sets itself: give "
                                  "your secret another name", name)
        if name in plain:
            raise SpecError.about("{secret_env}: %s is also a plain setting ({env}): give it once",
                                  name)
        if name not in result:
            result.append(name)
    return tuple(result)


def volume_tuple(volume: Sequence[str]) -> tuple[str, str, str]:
    host, container, mode = volume
    return parse_volume("%s:%s:%s" % (host, container, mode.lower()))


__all__ = ["env_tuple", "pairs", "secret_names", "volume_tuple"]
