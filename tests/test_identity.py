"""A run's identity (``core.identity``) and its one saved form, the spec as
JSON (``core.spec_codec``): made in one place, passed as one value, its
key never written where its public part goes, its signatures bound to what
they sign."""

import dataclasses
import json

import pytest

from tfmesos.core.identity import (
    DOCUMENT_CONTEXT,
    FRAMEWORK_CONTEXT,
    IdentityError,
    RunIdentity,
    seal,
    unseal,
)
from tfmesos.core.jobs import Job
from tfmesos.core.restarts import RestartPolicy
from tfmesos.core.spec import RunSpec
from tfmesos.core.spec_codec import spec_from_dict, spec_to_dict
from tfmesos.exceptions import SpecError
from tfmesos.record.mlflow_mapping import MlflowSpec
from tfmesos.ship.bundle import ShipSpec

KEY = bytes(range(32))


def test_a_new_identity_has_a_fresh_id_and_key_and_its_key_stays_out_of_sight():
    one, two = RunIdentity.new("alice", "team-a"), RunIdentity.new("alice", "team-a")
    assert one.run_id != two.run_id and one.key != two.key
    assert len(one.run_id) == 8 and len(one.key) == 32
    assert one.key.hex() not in repr(one) and "key" not in one.public()
    assert one.public() == {"run_id": one.run_id, "user": "alice", "principal": "team-a",
                            "framework_id": None, "bundle_sha256": None,
                            "task_side_sha256": None, "python_env_sha256": None,
                            "scheduler_attempt": 1}


def test_the_stages_of_a_run_are_new_values_and_round_trip_through_their_public_part():
    first = RunIdentity.new("alice")
    later = first.with_framework("F-1").with_shipment("a" * 64, "b" * 64,
                                                      "c" * 64).next_scheduler()
    assert first.framework_id is None and later.scheduler_attempt == 2
    again = RunIdentity.from_public(json.loads(json.dumps(later.public())), first.key)
    assert again == later


@pytest.mark.parametrize("data, why", [
    ({"run_id": "../../x", "user": "a"}, "not a run id"),
    ({"run_id": "0000abcd", "user": ""}, "user"),
    ({"run_id": "0000abcd", "user": "a", "bundle_sha256": "zz"}, "64 hex digits"),
    ({"run_id": "0000abcd", "user": "a", "scheduler_attempt": 0}, "attempt"),
    ({"run_id": "0000abcd", "user": "a", "key": "00"}, "unknown field"),
    ({"run_id": "0000abcd", "user": "a", "python": "/tmp/evil"}, "unknown field"),
    ([], "JSON object"),
])
def test_what_is_not_an_identity_is_refused_by_name(data, why):
    with pytest.raises(IdentityError, match=why):
        RunIdentity.from_public(data, KEY)


def test_signatures_are_bound_to_the_key_the_bytes_and_their_kind():
    run = RunIdentity(run_id="0000abcd", key=KEY, user="alice", principal="p")
    document = b'{"spec": {}}'
    signature = run.sign(document)
    assert run.verify(document, signature)
    assert not run.verify(document + b" ", signature)
    assert not dataclasses.replace(run, key=b"k" * 32).verify(document, signature)
    assert not run.verify(document, signature, FRAMEWORK_CONTEXT)
    assert not run.verify(document, None) and not run.verify(document, signature.upper())
    assert DOCUMENT_CONTEXT != FRAMEWORK_CONTEXT


def test_a_sealed_document_opens_only_with_the_key_and_unchanged():
    run = RunIdentity(run_id="0000abcd", key=KEY, user="alice")
    sealed = run.seal(b'{"python": "/usr/bin/python3"}')
    assert unseal(KEY, sealed) == b'{"python": "/usr/bin/python3"}'
    for forged in (sealed.replace(b"/usr/bin", b"/tmp/x"), sealed.split(b"\n", 1)[1],
                   b"", b"\xff\n{}", seal(b"k" * 32, b'{"python": "/usr/bin/python3"}')):
        with pytest.raises(IdentityError, match="detached.json is not signed with this run's"):
            unseal(KEY, forged, "detached.json")


def test_a_framework_proof_names_the_framework_its_principal_and_its_user():
    run = RunIdentity(run_id="0000abcd", key=KEY, user="alice", principal="p")
    with pytest.raises(IdentityError, match="no framework"):
        run.framework_proof()
    proof = run.with_framework("F-1").framework_proof()
    assert run.proves("F-1", "p", "alice", proof)
    # A look-alike that copied the label is another framework, principal or user.
    assert not run.proves("F-2", "p", "alice", proof)
    assert not run.proves("F-1", "q", "alice", proof)
    assert not run.proves("F-1", "p", "mallory", proof)
    assert not dataclasses.replace(run, key=b"k" * 32).proves("F-1", "p", "alice", proof)


def test_every_field_of_a_spec_round_trips_through_its_json(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    spec = RunSpec(
        name="train", role="ml/team", image=None, env=(("A", "1"),), secret_env=("TOKEN",),
        volumes=("/data:/data:ro",), launch_timeout=120.0, max_attempts=2, user="alice",
        python="/usr/bin/python3", jobs=(Job("worker", 2, cpus=0.5, mem=256, env={"B": "2"}),
                                          Job("ps", 1, cmd="python ps.py")),
        mode="replica", command="python train.py {task_index}", hooks={"initializer": "true"},
        master="10.0.0.9:5050", advertise_address=None, connect_timeout=30.0,
        local_master={"isolation": None}, restart_policy=RestartPolicy(2, "failure", 1.0),
        run_dir="/tmp/runs", logs=("worker:0",), failover_timeout=7200.0,
        ship=ShipSpec(str(tmp_path), exclude=("*.ckpt",), max_size=10 ** 6),
        mlflow=MlflowSpec("http://mlflow:5000", "exp"))
    data = json.loads(json.dumps(spec_to_dict(spec)))
    assert spec_from_dict(data) == spec
    assert data["secret_env"] == ["TOKEN"] and data["ship"]["directory"] == str(tmp_path)


def test_a_taken_over_spec_reads_its_ship_without_the_directory(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    spec = RunSpec(ship=ShipSpec(str(project)), master="h:5050")
    data = spec_to_dict(spec)
    project.rmdir()   # the code is gone, or another directory now: a takeover never reads it
    with pytest.raises(SpecError, match="no such directory"):
        spec_from_dict(data)
    packed = spec_from_dict(data, packed=True)
    assert packed.ship is not None and packed.ship.packed
    assert packed.ship.directory == str(project)


@pytest.mark.parametrize("data, why", [
    ({"format": 9}, "another format"),
    ({"future": 1}, "unknown field"),
    ({"launch_timeout": float("nan")}, "launch_timeout"),
    ({"secret_env": ["TFMESOS_SECRET"]}, "tfmesos or Mesos sets itself"),
    ({"env": [["TOKEN", "x"]], "secret_env": ["TOKEN"]}, "also a plain setting"),
    ({"ship": "."}, "'ship' must be an object"),
])
def test_a_spec_is_checked_again_when_read(data, why):
    with pytest.raises(SpecError, match=why):
        spec_from_dict(dict(spec_to_dict(RunSpec()), **data))
