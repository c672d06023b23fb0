"""A ``RunSpec`` as JSON and back (pure): the one saved form of a run, for
every path that outlives a process (a ``--failover`` run's
``failover.json``, a detached run's scheduler document). The JSON holds no
secret: ``env`` is the user's plain settings and ``secret_env`` only names
the variables whose values travel as Mesos secrets.

``spec_from_dict`` checks it again, as any spec is checked on construction.
A run taken over serves the files it started with (``ship.shipping.
Shipment.from_packed``), so its spec is read with ``packed=True``: ``ship``
keeps what it says (the record, ``--python-env``'s URL) without asking for
the shipped directory, which a takeover never reads.
"""

import dataclasses
from typing import TYPE_CHECKING, Any

from ..exceptions import SpecError
from ..mesos.master_address import without_password
from .jobs import Job
from .restarts import RestartPolicy
from .spec import RunSpec

if TYPE_CHECKING:   # imported when a spec ships
    from ..ship.bundle import ShipSpec

FORMAT = 1
_NESTED = ("jobs", "restart_policy", "ship", "mlflow")


def _plain(value: Any) -> Any:
    """Tuples as lists, all the way down (JSON has no tuples)."""
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    return value


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    return value


def spec_to_dict(spec: RunSpec) -> dict[str, Any]:
    data = {field.name: _plain(getattr(spec, field.name)) for field in dataclasses.fields(spec)
            if field.name not in _NESTED}
    data["master"] = without_password(spec.master)   # the password is in no file
    data["format"] = FORMAT
    data["jobs"] = [job.to_dict() for job in spec.jobs]
    data["restart_policy"] = dataclasses.asdict(spec.restart_policy)
    data["mlflow"] = dataclasses.asdict(spec.mlflow) if spec.mlflow is not None else None
    data["ship"] = {name: _plain(value) for name, value in
                    dataclasses.asdict(spec.ship).items()} if spec.ship is not None else None
    return data


def spec_from_dict(data: object, packed: bool = False, **changes: Any) -> RunSpec:
    """The RunSpec of ``spec_to_dict``'s ``data``, with ``changes``;
    SpecError for anything that is not one. ``packed``: the run's files are
    served as they were packed (module docstring)."""
    if not isinstance(data, dict):
        raise SpecError("a run's spec must be an object")
    data = dict(data)
    if data.pop("format", FORMAT) != FORMAT:
        raise SpecError("the run's spec has another format than this tfmesos reads (%d): "
                        "take it over with the tfmesos that started it" % FORMAT)
    known = {field.name for field in dataclasses.fields(RunSpec)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError("unknown field(s) in the run's spec: %s (a newer tfmesos wrote it?)"
                        % ", ".join(unknown))
    fields: dict[str, Any] = {name: _tuples(value) for name, value in data.items()
                              if name not in _NESTED}
    try:
        fields["jobs"] = tuple(Job.from_dict(dict(job, env=tuple(
            (job.get("env") or {}).items()))) for job in data.get("jobs") or ())
        fields["restart_policy"] = RestartPolicy(**(data.get("restart_policy") or {}))
        mlflow = data.get("mlflow")
        if mlflow is not None:
            from ..record.mlflow_mapping import MlflowSpec
            fields["mlflow"] = MlflowSpec(**mlflow)
        ship = data.get("ship")
        if ship is not None:
            fields["ship"] = _ship_spec(ship, packed)
        fields.update(changes)
        return RunSpec(**fields)
    except TypeError as exc:
        raise SpecError("malformed run spec: %s" % exc) from None


def _ship_spec(data: object, packed: bool) -> "ShipSpec":
    from ..ship.bundle import ShipSpec
    if not isinstance(data, dict):
        raise SpecError("the run's spec: 'ship' must be an object or null")
    fields = {name: _tuples(value) for name, value in data.items()}
    if packed:
        return ShipSpec.as_packed(**fields)
    return ShipSpec(**fields)


__all__ = ["spec_to_dict", "spec_from_dict"]
