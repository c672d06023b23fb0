import itertools
import json
import types

import pytest

from tfmesos.core.clusterspec import (
    cluster_spec,
    keras_coordinator,
    keras_environment,
    placeholders,
    render_command,
    task_environment,
    tf_config,
)
from tfmesos.core.fine_grained import Cluster


def test_cluster_spec_is_ordered_by_task_index():
    spec = cluster_spec({("worker", 1): "b:2", ("ps", 0): "p:1", ("worker", 0): "a:1",
                         ("chief", 0): "c:1", ("worker", 10): "k:1", ("worker", 2): "z:9"})
    assert spec == {"chief": ["c:1"], "worker": ["a:1", "b:2", "z:9", "k:1"], "ps": ["p:1"]}
    assert list(spec) == ["chief", "worker", "ps"]


def test_tf_config_leaves_evaluator_out_of_cluster():
    spec = {"chief": ["c:1"], "worker": ["w:1"], "ps": ["p:1"], "evaluator": ["e:1"]}
    assert tf_config(spec, "evaluator", 0) == {
        "cluster": {"chief": ["c:1"], "worker": ["w:1"], "ps": ["p:1"]},
        "task": {"type": "evaluator", "index": 0}}


def test_placeholders_and_environment():
    spec = {"worker": ["w0:1", "w1:2"], "ps": ["p:1"]}
    assert render_command("x --ps {ps_hosts} --w {worker_hosts} {job_name} {task_index}",
                          spec, "worker", 1) == "x --ps p:1 --w w0:1,w1:2 worker 1"
    env = task_environment(spec, "worker", 1)
    assert env["TFMESOS_WORKER_HOSTS"] == "w0:1,w1:2" and env["TFMESOS_TASK_INDEX"] == "1"
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
    assert placeholders({"worker": ["w:1"]}, "worker", 0)["ps_hosts"] == ""


KERAS = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
         "KERAS_DISTRIBUTION_PROCESS_ID")


def test_keras_coordinator_is_on_worker_0s_host_at_its_second_port():
    spec = {"chief": ["c:1"], "worker": ["10.0.0.7:31000", "10.0.0.8:31000"], "ps": ["p:1"]}
    assert keras_coordinator(spec, 31001) == "10.0.0.7:31001"
    assert keras_coordinator({"worker": ["[fe80::1]:31000"]}, 31001) == "[fe80::1]:31001"
    assert keras_coordinator({"worker": ["w0:1"]}, None) is None   # the offer had no ports
    assert keras_coordinator({"chief": ["c:1"]}, 31001) is None    # no workers


def test_every_worker_is_one_keras_process_and_other_jobs_get_nothing():
    spec = {"worker": ["a:1", "b:1", "c:1"], "ps": ["p:1"]}
    for index in range(3):
        env = task_environment(spec, "worker", index, "a:2")
        assert [env[name] for name in KERAS] == ["a:2", "3", str(index)]
    for job in ("ps", "chief", "evaluator"):
        assert not set(KERAS) & set(task_environment(spec, job, 0, "a:2"))
    assert not set(KERAS) & set(task_environment(spec, "worker", 0))
    assert keras_environment(spec, "worker", 0, None) == {}


COUNTS = [{job: n for job, n in zip(("chief", "worker", "ps", "evaluator"), combo) if n}
          for combo in itertools.product((0, 1), (0, 1, 2), (0, 1, 2), (0, 1))
          if combo[0] or combo[1]]  # tfrun needs a chief or a worker


@pytest.mark.parametrize("counts", COUNTS, ids=lambda c: "-".join("%s%d" % i for i in c.items()))
def test_tf_config_matches_what_tensorflow_reads(counts, monkeypatch):
    tf = pytest.importorskip("tensorflow")
    addresses = {(job, i): "h%s%d:%d" % (job, i, 2000 + i) for job, n in counts.items()
                 for i in range(n)}
    spec = cluster_spec(addresses)
    # Jobs without tasks may reach tf_config as empty lists; TF_CONFIG omits them.
    padded = {job: spec.get(job, []) for job in ("chief", "worker", "ps", "evaluator")}
    want = {j: a for j, a in spec.items() if j != "evaluator"}
    for (job, index) in addresses:
        config = tf_config(padded, job, index)
        assert all(config["cluster"].values()) and "evaluator" not in config["cluster"]
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        assert resolver.task_type == job and resolver.task_id == index
        assert resolver.cluster_spec().as_dict() == want


def test_a_clusters_cluster_spec_and_cluster_def_are_tensorflows_of_its_spec():
    # (In this module's worker, which imports TensorFlow once, not in the
    # training lane's pytest, which a cluster() test's c.cluster_spec made
    # import it.)
    tf = pytest.importorskip("tensorflow")
    spec = {"worker": ["127.0.0.1:2001", "127.0.0.1:2002"], "ps": ["127.0.0.1:2003"]}
    c = Cluster(types.SimpleNamespace(record=types.SimpleNamespace(directory=None),
                                      cluster_spec=spec, failure=None))
    assert isinstance(c.cluster_spec, tf.train.ClusterSpec) and c.cluster_spec.as_dict() == spec
    assert sorted(job.name for job in c.cluster_def.job) == ["ps", "worker"]
