"""One run of examples/keras_multiworker.py on two workers, shared by the
tests that read it: training in step and the chief saving (test_training),
TensorFlow's quiet stderr (test_tensorflow_quiet), the loss and accuracy
the Keras callback logs (test_metrics_runs). Each of them ran the example
on its own, three TensorFlow clusters for one: the suite has ten minutes.
conftest.py registers the fixture once (imported into each test module, a
session fixture would be one per module).
"""

import collections
import sys

import pytest

EPOCHS = 5

KerasExample = collections.namedtuple("KerasExample", "result model_dir run_dir epochs")


@pytest.fixture(scope="session")
def keras_example(tmp_path_factory):
    from tfrun_helpers import run_tfrun  # they import conftest, which imports this
    from training_helpers import RESOURCES, assert_nothing_left
    base = tmp_path_factory.mktemp("keras-example")
    model_dir, run_dir = base / "model", base / "run"
    result = run_tfrun("-w", "2", "-s", "0", *RESOURCES, "--run-dir", str(run_dir), "--",
                       sys.executable, "examples/keras_multiworker.py", "--model-dir",
                       str(model_dir), "--epochs", str(EPOCHS), timeout=300,
                       env={"TFMESOS_PROGRESS_INTERVAL": "0.5"})
    assert result.returncode == 0, result.stderr[-4000:]
    assert_nothing_left()
    return KerasExample(result, model_dir, run_dir, EPOCHS)
