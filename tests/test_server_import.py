"""A fine-grained task's server imports TensorFlow without the Keras that
``import tensorflow`` loads eagerly (``tensorflow_server.import_tensorflow``):
a stand-in TensorFlow does what tensorflow/__init__.py does (the eager
``keras.src.optimizers``, or ``tf_keras``' with TF_USE_LEGACY_KERAS, an
ImportError ignored) and a stand-in Keras notes each import of it. The
real TensorFlow's servers run through this in every fine-grained
integration test (test_cluster, test_training's in-graph run)."""

import os
import subprocess
import sys

import pytest
from tfrun_helpers import REPO

STAND_IN_TENSORFLOW = '''
import importlib, os
try:
    importlib.import_module("tf_keras.src.optimizers" if os.environ.get("TF_USE_LEGACY_KERAS")
                            else "keras.src.optimizers")
except (ImportError, AttributeError):
    pass
'''
NOTING_KERAS = "open(%r, 'a').write(__name__ + '\\n')\n"

PROBE = '''
import sys
from tfmesos.task.tensorflow_server import import_tensorflow
tf = import_tensorflow()
print(tf.__name__, sorted(name for name in sys.modules if "keras" in name))
import keras, tf_keras
print(keras.__name__, tf_keras.__name__)
'''


@pytest.mark.parametrize("legacy", ["", "1"])
def test_the_server_imports_tensorflow_without_keras_which_still_imports_after(tmp_path,
                                                                             legacy):
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text(STAND_IN_TENSORFLOW)
    noted = tmp_path / "noted"
    for package in ("keras", "tf_keras"):
        (tmp_path / package / "src").mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text(NOTING_KERAS % str(noted))
        (tmp_path / package / "src" / "__init__.py").write_text("")
        (tmp_path / package / "src" / "optimizers.py").write_text("")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), REPO]),
               TF_USE_LEGACY_KERAS=legacy)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["tensorflow []", "keras tf_keras"]
    assert noted.read_text() == "keras\ntf_keras\n"    # by the probe, after: never before
