"""A detached run's scheduler document (``detached.json``) and the record a
new scheduler carries on (``tfrun --detach``, ``tfmesos attach``;
``core.detached`` launches the scheduler task that reads them).

The document is the run's saved form for its scheduler task: the spec
(plain settings only: a secret's value never), what was packed, and the
run's public identity with its framework id, principal and user, SEALED
with the run's key (``identity.seal``: the signature line, then the very
bytes it signs). Whoever reads it from a sandbox opens it with the key
they hold (``open_document``: nothing of it is read before the signature
checks) and takes it for a run only when it names that run's framework,
principal and user (``bound_to``): a copy in a look-alike's sandbox is
another framework's. The record carried on (``run/run.json`` of the last
scheduler's sandbox) names the run and its tasks only (``check_previous``).
"""

import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

from ..exceptions import TFMesosError
from ..protocol import json_documents
from .identity import IdentityError, RunIdentity, unseal
from .spec import RunSpec
from .spec_codec import spec_to_dict

if TYPE_CHECKING:
    from ..record.schema import RunFile

DETACHED_FILE = "detached.json"
PREVIOUS_RECORD = "previous-run.json"   # the record a relaunched scheduler carries on
RUN_KEY = "TFMESOS_RUN_KEY"             # the scheduler task's copy of the run's secret, hex
FORMAT = 2
MAX_DOCUMENT = 16 << 20    # bytes of a scheduler document
MAX_RECORD = 64 << 20      # bytes of the record a new scheduler carries on


class DetachError(TFMesosError):
    """The scheduler task could not take the run over; one line. ``reason``:
    its evidence, when there is some (``scheduler: LINE``, the last line the
    task wrote on stderr)."""

    reason: Optional[str] = None


def document_body(spec: RunSpec, packed: Mapping[str, str],
                  shipped: Optional[Mapping[str, Any]], cpus: float, mem: float,
                  previous: Optional[str] = None) -> dict[str, Any]:
    """The scheduler document but its identity: ``spec`` (a RunSpec, sent
    without its ``ship``; its ``env`` holds plain settings only, the values
    of ``secret_env`` never), ``packed`` {role: file name in the sandbox},
    ``shipped`` (the Shipment's ``record()``), ``previous``: the file name
    of the run's record so far."""
    spec = dataclasses.replace(spec, ship=None, advertise_address=None)
    return {"format": FORMAT, "spec": spec_to_dict(spec), "packed": packed,
            "shipped": shipped, "previous": previous, "scheduler_cpus": cpus,
            "scheduler_mem": mem}


def seal_document(identity: RunIdentity, body: Mapping[str, Any]) -> bytes:
    """detached.json: ``body`` with ``identity.public()`` (its framework
    id, principal and user: the document is the run's in that framework
    only), sealed with the run's key."""
    if identity.framework_id is None:
        raise IdentityError("a scheduler document is written once the framework is known")
    payload = json.dumps(dict(body, identity=identity.public()), sort_keys=True)
    return identity.seal(payload.encode("utf-8"))


def open_document(data: bytes, key: bytes, what: str = "the scheduler document"
                  ) -> tuple[dict[str, Any], RunIdentity]:
    """(the document, its ``RunIdentity``) of the sealed bytes ``data``
    once their signature checks with ``key`` (nothing of them is read
    before); DetachError (or IdentityError) otherwise."""
    if len(data) > MAX_DOCUMENT:
        raise DetachError("%s is larger than a scheduler document can be" % what)
    payload = unseal(key, data, what)
    try:
        document = json.loads(payload.decode("utf-8"))
    except ValueError as exc:
        raise DetachError("%s is not JSON: %s" % (what, exc)) from None
    if not isinstance(document, dict) or document.get("format") != FORMAT \
            or not isinstance(document.get("spec"), dict):
        raise DetachError("%s is not a detached run's document of this tfmesos" % what)
    return document, RunIdentity.from_public(document.get("identity"), key)


def read_sealed(path: str, what: Optional[str] = None) -> bytes:
    """The bytes of the sealed file ``path`` (at most ``MAX_DOCUMENT``)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_DOCUMENT + 1)
    except OSError as exc:
        raise DetachError("cannot read %s: %s" % (what or path, exc.strerror or exc)) from None


def bound_to(identity: RunIdentity, **expected: Optional[str]) -> Optional[str]:
    """Why ``identity`` (a document's, its signature checked) is not the
    run of what ``expected`` names (``run_id``, ``framework_id``,
    ``principal``, ``user``: those given); None when it is. A document the
    key holder wrote for one framework is never taken for another's (a copy
    in a look-alike's sandbox)."""
    for name, value in expected.items():
        found = getattr(identity, name)
        if found != value:
            return "it names another %s (%s, not %s)" % (
                name.replace("_", " "), found or "none", value or "none")
    return None


def check_previous(record: "RunFile", run_id: str, what: str = "the run's record") -> "RunFile":
    """DetachError unless ``record`` (a ``RunFile``) is run ``run_id``'s and
    names tasks of that run only (``tfmesos.<run id>.*``): a new scheduler
    adopts, expects and may kill what it names."""
    if record.run_id != run_id:
        raise DetachError("%s is run %s's, not run %s's: nothing of it is used"
                          % (what, record.run_id or "(none)", run_id))
    prefix = "tfmesos.%s." % run_id
    for task in record.tasks:
        for attempt in task.attempts:
            if not str(attempt.task_id).startswith(prefix):
                raise DetachError("%s names task %s, which is not of run %s: nothing of it "
                                  "is used" % (what, attempt.task_id, run_id))
    return record


def read_previous(path: str, run_id: str, what: Optional[str] = None) -> "RunFile":
    """The ``RunFile`` at ``path`` (run ``run_id``'s record so far), checked
    (``check_previous``); DetachError otherwise."""
    from ..record.schema import SchemaError, read_run_file
    what = what or path
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(MAX_RECORD + 1)
        if len(text) > MAX_RECORD:
            raise ValueError("larger than %d MiB" % (MAX_RECORD >> 20))
        record = read_run_file(json_documents.loads(text))
    except (OSError, ValueError, SchemaError) as exc:
        raise DetachError("cannot read %s: %s" % (what, exc)) from None
    return check_previous(record, run_id, what)


__all__ = ["DETACHED_FILE", "PREVIOUS_RECORD", "RUN_KEY", "DetachError", "document_body",
           "seal_document", "open_document", "read_sealed", "bound_to", "check_previous",
           "read_previous"]
