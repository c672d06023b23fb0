"""``tfmesos.run(fn, framework=...)`` without a cluster (issue 36, item
4): the distributed environment ``task/process_group.py`` sets up around
``fn`` in a task, here a torch group of one process in this one, and the
call's checks (an unknown framework, TensorFlow's jobs in a torch or jax
run), raised before anything starts."""

import pytest

import tfmesos
from tfmesos.exceptions import SpecError
from tfmesos.protocol import hostport, task_env
from tfmesos.task import process_group
from tfmesos.task.process_group import GroupError, framework_group


def group_of_one(**more):
    """What a torch task of one worker is told (``training_frameworks``)."""
    return dict({task_env.FRAMEWORK: "torch", "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": str(hostport.free_port("127.0.0.1")), "RANK": "0",
                 "WORLD_SIZE": "1", "LOCAL_RANK": "0", task_env.GPUS: "0"}, **more)


@pytest.fixture
def told(monkeypatch):
    """Sets the task's variables (torch's env:// reads os.environ)."""
    def tell(environ):
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        return environ
    return tell


def test_torch_group_is_there_while_fn_runs_and_gone_after(told):
    dist = pytest.importorskip("torch.distributed")
    with framework_group(told(group_of_one())):
        assert dist.is_initialized()
        assert (dist.get_backend(), dist.get_rank(), dist.get_world_size()) == ("gloo", 0, 1)
    assert not dist.is_initialized()


def test_torch_group_is_gone_after_fn_raised_and_fn_s_exception_stays(told):
    dist = pytest.importorskip("torch.distributed")
    with pytest.raises(ZeroDivisionError):
        with framework_group(told(group_of_one())):
            raise ZeroDivisionError("in fn")
    assert not dist.is_initialized()


def test_fn_may_destroy_the_torch_group_itself(told):
    dist = pytest.importorskip("torch.distributed")
    with framework_group(told(group_of_one())):
        dist.destroy_process_group()
    assert not dist.is_initialized()


def test_torch_without_its_variables_is_a_group_error_with_torch_s_own(monkeypatch):
    pytest.importorskip("torch.distributed")
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(GroupError) as caught:
        with framework_group({task_env.FRAMEWORK: "torch"}):
            pytest.fail("fn ran without a group")
    assert str(caught.value) == "cannot set up torch's distributed environment"
    assert isinstance(caught.value.__cause__, ValueError)
    assert "expected, but not set" in str(caught.value.__cause__)


class FakeTorch:
    class cuda:
        available = True

        @classmethod
        def is_available(cls):
            return cls.available


@pytest.mark.parametrize("gpus, cuda, backend", [
    ("1", True, "nccl"), ("2", True, "nccl"), ("0", True, "gloo"), (None, True, "gloo"),
    ("1", False, "gloo"), ("junk", True, "gloo")])
def test_nccl_only_where_the_task_has_gpus_and_cuda(monkeypatch, gpus, cuda, backend):
    monkeypatch.setattr(FakeTorch.cuda, "available", cuda)
    environ = {} if gpus is None else {task_env.GPUS: gpus}
    assert process_group.torch_backend(FakeTorch, environ) == backend


def test_tensorflow_sets_up_nothing():
    for environ in ({}, {task_env.FRAMEWORK: "tensorflow"}):
        with framework_group(environ):
            pass


def test_an_unknown_framework_in_the_task_is_a_group_error():
    with pytest.raises(GroupError) as caught:
        with framework_group({task_env.FRAMEWORK: "mxnet"}):
            pytest.fail("fn ran")
    assert "unknown framework 'mxnet'" in str(caught.value.__cause__)


def unused():
    return None


def test_an_unknown_framework_is_a_value_error_naming_the_valid_ones():
    with pytest.raises(ValueError) as caught:
        tfmesos.run(unused, workers=2, framework="pytorch", ship=None)
    assert isinstance(caught.value, SpecError)
    assert str(caught.value) == \
        "unknown framework 'pytorch': use one of tensorflow, torch, jax"
    with pytest.raises(ValueError):
        tfmesos.submit(unused, workers=2, framework=None, ship=None)


@pytest.mark.parametrize("framework", ["torch", "jax"])
@pytest.mark.parametrize("jobs, job", [({"ps": 1}, "ps"), ({"chief": True}, "chief"),
                                       ({"evaluator": True}, "evaluator")])
def test_tensorflow_s_jobs_are_refused_as_tfrun_refuses_them(framework, jobs, job):
    with pytest.raises(SpecError) as caught:
        tfmesos.run(unused, workers=2, framework=framework, ship=None, **jobs)
    assert str(caught.value) == "framework=%s runs workers only, one process group: drop " \
        "the %s task(s)" % (framework, job)
