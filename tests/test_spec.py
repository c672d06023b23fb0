import pytest

from tfmesos.core.jobs import REPLICA_JOBS, Job, check_command_template, parse_jobs
from tfmesos.core.spec import RunSpec
from tfmesos.exceptions import SpecError


def test_job_round_trip_with_non_defaults():
    job = Job(name="worker", num=3, cpus=2.5, mem=2048, gpus=1, cmd="python x.py", start=1,
              env={"A": "1"})
    assert Job.from_dict(job.to_dict()) == job
    assert list(job.task_indices()) == [1, 2, 3]
    assert job.env == (("A", "1"),)


@pytest.mark.parametrize("fields, message", [
    ({"name": "worker", "num": 0}, "num must be a whole number from 1 to 10000"),
    ({"name": "worker", "cpus": 0}, "cpus must be a number above 0, at most 10000"),
    ({"name": "worker", "mem": -5}, "mem must be a number above 0, at most 100000000"),
    ({"name": "worker", "gpus": 0.5}, "gpus must be a whole number"),
    ({"name": "worker", "gpus": -1}, "gpus must be a whole number"),
    ({"name": "Worker"}, "invalid job name"),
    # A 240-letter name made task ids over Mesos' 255 (validateID): TASK_ERROR.
    ({"name": "w" * 65}, "invalid job name .* at most 64 characters"),
    ({"name": "chief", "num": 2}, "at most one chief"),
    ({"name": "worker", "cpu": 1}, "unknown job field"),
    ({"num": 2}, "needs a 'name'"),
    ({"name": "worker", "env": ["NOEQUALS"]}, "NAME=VALUE"),
])
def test_bad_jobs_are_refused_with_the_reason(fields, message):
    with pytest.raises(SpecError, match=message):
        Job.from_dict(fields)


def test_spec_error_is_a_value_error():
    with pytest.raises(ValueError):
        Job(name="worker", num=-1)


def test_parse_jobs_checks_names_for_the_mode():
    with pytest.raises(SpecError, match="unknown job 'trainer'"):
        parse_jobs([{"name": "trainer"}], allowed=REPLICA_JOBS)
    with pytest.raises(SpecError, match="given twice"):
        parse_jobs([{"name": "ps"}, {"name": "ps"}])
    with pytest.raises(SpecError, match="no jobs"):
        parse_jobs([])
    assert [j.name for j in parse_jobs([Job("ps"), {"name": "worker", "num": 2}])] == ["ps", "worker"]


def test_run_spec_validation():
    spec = RunSpec(containerizer="docker", volumes=("/data:/data:ro",), env={"A": "b"},
                   docker_parameters=("memory-swap=-1",))
    assert spec.containerizer == "DOCKER"
    assert spec.volumes == (("/data", "/data", "RO"),)
    assert spec.docker_parameters == (("memory-swap", "-1"),)
    with pytest.raises(SpecError, match="Mesos refuses the Docker parameter 'name'"):
        RunSpec(docker_parameters=(("name", "mine"),))   # MESOS-8497: TASK_ERROR
    with pytest.raises(SpecError, match="unknown containerizer"):
        RunSpec(containerizer="rkt")
    with pytest.raises(SpecError, match="not absolute"):
        RunSpec(volumes=("data:/data",))
    with pytest.raises(SpecError, match="launch_timeout"):
        RunSpec(launch_timeout=0)
    with pytest.raises(SpecError, match="invalid Mesos role"):
        RunSpec(role="has space")


def test_command_template_placeholders():
    jobs = parse_jobs([{"name": "ps"}, {"name": "worker"}])
    check_command_template(
        "python t.py --ps {ps_hosts} --w {worker_hosts} {job_name} {task_index} {{x}}", jobs)
    with pytest.raises(SpecError, match=r"unknown placeholder \{wrker_hosts\}"):
        check_command_template("python t.py {wrker_hosts}", jobs)
    with pytest.raises(SpecError, match="bad braces"):
        check_command_template("python -c 'print({)'", jobs)


@pytest.mark.parametrize("command, error", [
    ("{task_index:zz}", r"cannot be filled in \(ValueError: Unknown format code 'z'"),
    ("{job_name:d}", r"cannot be filled in \(ValueError: Unknown format code 'd'"),
    ("{job_name!x}", r"cannot be filled in \(ValueError: Unknown conversion specifier x\)"),
    ("{task_index:{foo}}", r"cannot be filled in \(KeyError: 'foo'\)"),
    ("{job_name[9]}", r"\{job_name\[9\]\} in the command takes no attribute or index"),
    ("{job_name.upper}", r"\{job_name.upper\} in the command takes no attribute or index"),
])
def test_a_placeholder_that_cannot_be_filled_in_is_refused_before_the_run(command, error):
    # Each was a traceback once the cluster formed, its tasks launched
    # ({job_name.upper} filled in "<built-in method upper of str object>").
    jobs = parse_jobs([{"name": "ps"}, {"name": "worker"}])
    with pytest.raises(SpecError, match=error):
        check_command_template("echo " + command, jobs)


def test_placeholders_with_a_format_or_a_conversion_are_taken():
    jobs = parse_jobs([{"name": "worker"}])
    check_command_template("echo {task_index:03d} {job_name!r:>10} {worker_hosts!s}", jobs)


def test_refusals_wait_5_s_unless_the_user_chose_a_connect_timeout():
    from tfmesos.core.spec import REFUSED_TIMEOUT, RunSpec

    assert (RunSpec().connect_timeout, RunSpec().refused_timeout) == (60.0, REFUSED_TIMEOUT)
    chosen = RunSpec(connect_timeout=60)
    assert (chosen.connect_timeout, chosen.refused_timeout) == (60, 60)
    assert RunSpec(connect_timeout=7, refused_timeout=1).refused_timeout == 1


def test_names_and_ids_with_a_trailing_newline_are_refused():
    # Each pattern ended in "$", which re.match lets a final "\n" pass:
    # Job(name="worker\n") was taken, so was a run id "0123abcd\n" (a key
    # file's name, a framework label) and an environment name "A\n".
    from tfmesos.backends.advertise import _well_formed
    from tfmesos.core.identity import IdentityError, RunIdentity
    from tfmesos.core.spec_fields import env_tuple
    from tfmesos.core.task_names import ranges
    from tfmesos.record.takeover_files import TakeoverError, key_path

    with pytest.raises(SpecError, match="invalid job name"):
        Job(name="worker\n")
    with pytest.raises(IdentityError):
        RunIdentity(run_id="0123abcd\n", key=bytes(32), user="alice")
    with pytest.raises(IdentityError):
        RunIdentity(run_id="0123abcd", key=bytes(32), user="alice", bundle_sha256="a" * 64 + "\n")
    with pytest.raises(SpecError, match="invalid environment variable name"):
        env_tuple({"A\n": "1"})
    with pytest.raises(TakeoverError):
        key_path("0123abcd\n", {"TFMESOS_KEYS_DIR": "/nonexistent"})
    assert ranges(["worker:0\n"]) == [("worker:0\n", 1)]
    assert not _well_formed("host\n")


@pytest.mark.parametrize("given", ["LOCAL", "Local", " local "])
def test_local_in_any_case_is_the_embedded_master(given):
    # parse_master took 'LOCAL' for the embedded master, tfrun did not:
    # "IndexError: tuple index out of range" (a remote master of no URL).
    from tfmesos.core import config
    assert config.resolve_master(given, {}) == config.LOCAL
    assert config.resolve_master(None, {"MESOS_MASTER": given}) == config.LOCAL


def test_a_jobs_cpus_and_mem_are_kept_as_mesos_keeps_them():
    # In thousandths (src/common/values.cpp): 3 x 2/3 cpus are 2.001 to
    # Mesos, which a 2-cpu agent cannot hold; the run's totals, messages and
    # TaskInfos say so (found by a review helper: the third task got TASK_ERROR).
    from tfmesos.core.jobs import Job
    job = Job("worker", num=3, cpus=2 / 3, mem=100.00049)
    assert (job.cpus, job.mem) == (0.667, 100.0)
    assert Job("worker", cpus=0.0005).cpus == 0.001


@pytest.mark.parametrize("content, why", [
    ("garbage\n", "holds no certificate Python's ssl can load"),
    (None, "not a regular file"),
])
def test_a_ca_bundle_that_is_no_certificates_is_refused_naming_it(tmp_path, content, why):
    # It was a traceback (ssl.SSLError) from the driver's start, or "no such
    # file" for /dev/null (found by a review helper).
    if content is None:
        bundle = "/dev/null"
    else:
        bundle = str(tmp_path / "garbage.pem")
        (tmp_path / "garbage.pem").write_text(content)
    with pytest.raises(SpecError) as caught:
        RunSpec(master="https://127.0.0.1:1", ca_bundle=bundle)
    assert str(caught.value).startswith("ca_bundle=%s: %s" % (bundle, why)), str(caught.value)


def test_a_command_longer_than_a_task_can_run_is_refused():
    # A glob of 3,500 files: every attempt failed "Argument list too long"
    # (exit 127); over 1 MiB, a traceback from the rendezvous' frame limit
    # (found by a review helper). Linux caps sh -c's one argument at 128 KiB.
    from tfmesos.core.jobs import MAX_COMMAND_BYTES
    with pytest.raises(SpecError, match="the command is 182004 bytes once its placeholders"):
        RunSpec(mode="replica", command="echo " + "x" * 181999, jobs=(Job("worker"),))
    with pytest.raises(SpecError, match="more than the 131071 bytes"):
        RunSpec(mode="replica", command="echo {task_index:>2000000}", jobs=(Job("worker"),))
    RunSpec(mode="replica", command="x" * MAX_COMMAND_BYTES, jobs=(Job("worker"),))


def test_a_command_that_outgrows_a_task_once_filled_in_for_the_cluster_is_refused():
    from tfmesos.core.slots import make_slots
    from tfmesos.core.start_message import start_message
    spec = RunSpec(mode="replica", command="echo " + "{worker_hosts} " * 500,
                   jobs=(Job("worker", 20),))
    slot = make_slots(spec.jobs)[0]
    cluster = {"worker": ["127.0.0.1:%d" % (31000 + n) for n in range(20)]}
    with pytest.raises(SpecError, match=r"the command is 1600\d\d bytes .* \(for this cluster\)"):
        start_message(spec, slot, cluster, forward_logs=False, keras=None, group=None,
                      run_id="r1", restarts=0, cwd=None)


def test_a_failed_clusters_addresses_are_refused_not_handed_to_a_session():
    # After a task failed, c.spec and c.targets still gave the dead server's
    # address, and a session on it waits for ever (TensorFlow's CreateSession
    # retries; found by a review helper). As after the block, they refuse.
    import types

    from tfmesos.core.fine_grained import Cluster
    from tfmesos.exceptions import ClusterError, TaskFailed
    run = types.SimpleNamespace(record=types.SimpleNamespace(directory=None), failure=None,
                                cluster_spec={"worker": ["127.0.0.1:1", "127.0.0.1:2"]})
    cluster = Cluster(run)
    assert cluster.targets["/job:worker/task:1"] == "grpc://127.0.0.1:2"
    run.failure = TaskFailed("task worker:1 exited with code 137", "worker:1")
    with pytest.raises(ClusterError) as caught:
        print(cluster.targets)
    assert str(caught.value) == (
        "this cluster failed (task worker:1 exited with code 137): a session on its servers' "
        "addresses would wait for ever; end the with block (c.failure says why)")
