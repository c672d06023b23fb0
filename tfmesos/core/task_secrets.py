"""Mesos value secrets: what a run hands its scheduler task and its tasks
without writing it anywhere (``tfrun --secret-env NAME``, the run's key,
the credentials a detached scheduler subscribes with).

A secret is an ``Environment.Variable`` of type ``SECRET`` whose
``Secret.Value`` holds the bytes (include/mesos/v1/mesos.proto,
docs/secrets.md). The agent resolves it into the task's environment: the
Mesos containerizer always enables the ``environment_secret`` isolator
(src/slave/containerizer/mesos/containerizer.cpp) and its default resolver
returns a VALUE secret's data. The values never enter the ``RunSpec`` (it
names them, ``secret_env``), the record or a scheduler document: each
process that launches tasks reads them from its own environment
(``values``).

The Docker containerizer passes no secret: it copies each variable's
``value`` (src/docker/docker.cpp, ``Docker::run``), which a SECRET variable
has not, so the task gets it empty. ``RunSpec`` refuses ``secret_env``
with ``-C DOCKER`` and an image, and the run's key stays a plain variable
there (``supported``).
"""

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..exceptions import SpecError

if TYPE_CHECKING:   # for annotations only
    from .spec import RunSpec


def supported(spec: "RunSpec") -> bool:
    """Whether ``spec``'s tasks run where Mesos resolves secrets (not in an
    image under the Docker containerizer)."""
    return not (spec.image and spec.containerizer == "DOCKER")


def values(spec: "RunSpec", environ: Mapping[str, str]) -> dict[str, str]:
    """``{name: value}`` of ``spec.secret_env`` from ``environ``; SpecError
    naming a variable that is not set there, or that Mesos would refuse."""
    found = {}
    for name in spec.secret_env:
        value = environ.get(name)
        if value is None:
            raise SpecError.about("{secret_env}: %s is not set in the environment: set it "
                                  "(export %s=...) before the run starts, or leave it out",
                                  name, name)
        check_value(name, value)
        found[name] = value
    return found


def check_value(name: str, value: str) -> None:
    """SpecError for a value Mesos refuses in a secret: a NUL byte
    (``validateEnvironment``, src/common/validation.cpp)."""
    if "\0" in value:
        raise SpecError.about("{secret_env}: %s holds a NUL byte, which Mesos refuses in an "
                              "environment secret", name)


def encode(value: str) -> str:
    """A secret's ``Secret.Value.data``: the value's bytes (as the
    environment held them), base64 as protobuf's JSON writes ``bytes``."""
    return base64.b64encode(value.encode("utf-8", "surrogateescape")).decode("ascii")


def variable(name: str, value: str) -> dict[str, Any]:
    """The ``Environment.Variable`` that gives a task ``name`` = ``value``
    as a Mesos value secret."""
    return {"name": name, "type": "SECRET",
            "secret": {"type": "VALUE", "value": {"data": encode(value)}}}


__all__ = ["supported", "values", "check_value", "encode", "variable"]
