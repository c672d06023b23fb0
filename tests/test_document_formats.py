"""The fields of the documents a run leaves for another tfmesos to read
(a --failover run's failover.json, a detached run's scheduler document,
the run's spec and public identity that both embed) are pinned to the
format numbers their readers check. A tfmesos reads a document of its own
format only, and refuses an unknown field: a field added without a new
format number makes an older tfmesos fail on 'unknown field(s)' instead
of its 'written by another tfmesos (format N; this one reads M)' line.

Adding a field: bump the format of every document it changes, and pin the
new field list under the new number here (the old list stays as it was).
python_env_sha256 joined the identity in 647fc09 at failover format 2 and
document format 2 (files of both forms exist; see the commit that added
this test): format 2 is pinned as it is since."""

import dataclasses

import pytest

from tfmesos.core import scheduler_document, spec_codec
from tfmesos.core.identity import IdentityError, RunIdentity
from tfmesos.core.jobs import Job
from tfmesos.core.spec import RunSpec
from tfmesos.record import takeover_files
from tfmesos.record.mlflow_mapping import MlflowSpec
from tfmesos.record.takeover_files import FailoverFile
from tfmesos.ship.bundle import ShipSpec

IDENTITY = ["bundle_sha256", "framework_id", "principal", "python_env_sha256", "run_id",
            "scheduler_attempt", "task_side_sha256", "user"]

# {format number: {document: its sorted field names}}
FAILOVER_FIELDS = {2: {
    "failover.json": ["format", "identity", "packed", "spec", "workdir"],
    "identity": IDENTITY,
}}
DOCUMENT_FIELDS = {2: {
    "detached.json": ["format", "identity", "packed", "previous", "scheduler_cpus",
                      "scheduler_mem", "shipped", "spec"],
    "identity": IDENTITY,
}}
SPEC_FIELDS = {1: {
    "spec": ["advertise_address", "ca_bundle", "command", "connect_timeout", "containerizer",
             "coordinator", "docker_parameters", "elastic", "env", "failover_timeout",
             "force_pull", "format", "framework", "hooks", "image", "jobs", "launch_timeout",
             "local_master", "logs", "master", "master_scheme", "max_attempts", "mlflow", "mode",
             "name", "nproc_per_task", "python", "quiet_tensorflow", "reconnect_grace",
             "refused_timeout", "restart_policy", "role", "run_dir", "secret_env", "ship",
             "shown_command", "sticky_jobs", "sticky_timeout", "user", "verify", "volumes"],
    "spec.jobs[]": ["cmd", "cpus", "env", "gpus", "mem", "name", "num", "start"],
    "spec.restart_policy": ["backoff", "max_backoff", "max_restarts", "restart_on"],
    "spec.ship": ["allow_secrets", "directory", "exclude", "extra_files", "follow_links",
                  "max_size", "packed", "python_env"],
    "spec.mlflow": ["experiment", "tracking_uri"],
}}

SPEC = RunSpec(name="train.py", master="127.0.0.1:5050", jobs=(Job("worker", 1),),
               mode="replica", command="python train.py")
IDENTITY_NOW = RunIdentity.new("alice").with_framework("F-1")


def failover_fields():
    written = FailoverFile(identity=IDENTITY_NOW.public(), spec=spec_codec.spec_to_dict(SPEC),
                           packed={}, workdir="/").to_dict()
    return {"failover.json": sorted(written), "identity": sorted(written["identity"])}


def document_fields():
    sealed = scheduler_document.seal_document(
        IDENTITY_NOW, scheduler_document.document_body(SPEC, {}, None, 0.5, 512))
    document, _ = scheduler_document.open_document(sealed, IDENTITY_NOW.key)
    return {"detached.json": sorted(document), "identity": sorted(document["identity"])}


def spec_fields():
    written = spec_codec.spec_to_dict(SPEC)
    return {"spec": sorted(written), "spec.jobs[]": sorted(written["jobs"][0]),
            "spec.restart_policy": sorted(written["restart_policy"]),
            "spec.ship": sorted(field.name for field in dataclasses.fields(ShipSpec)),
            "spec.mlflow": sorted(field.name for field in dataclasses.fields(MlflowSpec))}


@pytest.mark.parametrize("constant, number, pinned, found", [
    ("FAILOVER_FORMAT (tfmesos/record/takeover_files.py)", takeover_files.FAILOVER_FORMAT,
     FAILOVER_FIELDS, failover_fields),
    ("FORMAT (tfmesos/core/scheduler_document.py)", scheduler_document.FORMAT,
     DOCUMENT_FIELDS, document_fields),
    ("FORMAT (tfmesos/core/spec_codec.py)", spec_codec.FORMAT, SPEC_FIELDS, spec_fields),
], ids=["failover", "scheduler-document", "spec"])
def test_a_documents_fields_change_only_with_its_format_number(constant, number, pinned, found):
    assert number in pinned, (
        "%s is %d, whose fields no one pinned: add them under %d in %s"
        % (constant, number, number, __file__))
    changed = {document: fields for document, fields in found().items()
               if fields != pinned[number].get(document)}
    assert not changed, (
        "the fields of %s changed while %s is still %d: an older tfmesos would refuse the file "
        "on an unknown field, not by its format; bump %s and pin the new fields under the new "
        "number in %s (found: %s)" % (", ".join(sorted(changed)), constant, number, constant,
                                      __file__, changed))


def test_an_unknown_identity_field_says_a_newer_tfmesos_wrote_it_and_what_to_do():
    data = dict(IDENTITY_NOW.public(), python_env_sha512="0" * 128)
    with pytest.raises(IdentityError) as refused:
        RunIdentity.from_public(data, IDENTITY_NOW.key)
    assert str(refused.value) == (
        "unknown field(s) in a run's identity: python_env_sha512 (a newer tfmesos wrote it?): "
        "take the run over with the tfmesos that started it")
