"""A ``RunSpec`` as JSON and back (pure): what a detached run's scheduler
task is given (``core.detached``), checked again when it is read, as any
spec is. ``ship`` is not carried: the scheduler task serves the files the
submitter packed (``ship.shipping.Shipment.from_packed``)."""

import dataclasses
from typing import Any

from ..exceptions import SpecError
from .restarts import RestartPolicy
from .spec import Job, RunSpec

_NESTED = ("jobs", "restart_policy", "ship", "mlflow")


def spec_to_dict(spec):
    data = {field.name: getattr(spec, field.name) for field in dataclasses.fields(spec)
            if field.name not in _NESTED}
    data = {name: [list(item) if isinstance(item, tuple) else item for item in value]
            if isinstance(value, tuple) else value for name, value in data.items()}
    data["jobs"] = [job.to_dict() for job in spec.jobs]
    data["restart_policy"] = dataclasses.asdict(spec.restart_policy)
    data["mlflow"] = dataclasses.asdict(spec.mlflow) if spec.mlflow is not None else None
    return data


def spec_from_dict(data, **changes):
    """The RunSpec of ``spec_to_dict``'s ``data``, with ``changes``;
    SpecError for anything that is not one."""
    if not isinstance(data, dict):
        raise SpecError("a run's spec must be an object")
    known = {field.name for field in dataclasses.fields(RunSpec)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError("unknown field(s) in the run's spec: %s (a newer tfmesos wrote it?)"
                        % ", ".join(unknown))
    fields: dict[str, Any] = {name: tuple(tuple(item) if isinstance(item, list) else item for item in value)
              if isinstance(value, list) else value for name, value in data.items()}
    try:
        fields["jobs"] = tuple(Job.from_dict(dict(job, env=tuple(
            (job.get("env") or {}).items()))) for job in data.get("jobs") or ())
        fields["restart_policy"] = RestartPolicy(**(data.get("restart_policy") or {}))
        mlflow = data.get("mlflow")
        if mlflow is not None:
            from ..record.mlflow_mapping import MlflowSpec
            fields["mlflow"] = MlflowSpec(**mlflow)
        fields.update(changes)
        return RunSpec(**fields)
    except TypeError as exc:
        raise SpecError("malformed run spec: %s" % exc) from None
