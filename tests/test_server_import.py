"""A fine-grained task's server imports TensorFlow without the Keras, JAX
and SciPy that ``import tensorflow`` loads where they are installed
(``tensorflow_server.import_tensorflow``): a stand-in TensorFlow does what
TensorFlow's import does (tensorflow/__init__.py's eager
``keras.src.optimizers``, or ``tf_keras``' with TF_USE_LEGACY_KERAS;
tensorflow/lite/python/util.py's ``from jax import jit``; the legacy
tensorflow/python/keras' ``from scipy.sparse import issparse``; each
ImportError ignored) and a stand-in of each package notes each import of
it. The real TensorFlow's servers run through this in every fine-grained
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
try:
    from jax import jit
except ImportError:
    jit = None
try:
    from scipy.sparse import issparse
except ImportError:
    issparse = None
'''
# Each stand-in package's files (its __init__.py also notes each import of it).
STAND_INS = {"keras": {"src/__init__.py": "", "src/optimizers.py": ""},
             "tf_keras": {"src/__init__.py": "", "src/optimizers.py": ""},
             "jax": {"__init__.py": "def jit(f):\n    return f\n"},
             "scipy": {"sparse.py": "def issparse(x):\n    return False\n"}}
NOTING = "open(%r, 'a').write(__name__ + '\\n')\n"

PROBE = '''
import sys
from tfmesos.task.tensorflow_server import import_tensorflow
tf = import_tensorflow()
print(tf.__name__, sorted(name for name in sys.modules
                         if name.partition(".")[0] in ("keras", "tf_keras", "jax", "scipy")))
import keras, tf_keras, jax, scipy.sparse
print(keras.__name__, tf_keras.__name__, jax.__name__, scipy.sparse.__name__)
'''


@pytest.mark.parametrize("legacy", ["", "1"])
def test_the_server_imports_tensorflow_without_keras_jax_or_scipy_which_still_import_after(
        tmp_path, legacy):
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text(STAND_IN_TENSORFLOW)
    noted = tmp_path / "noted"
    for package, files in STAND_INS.items():
        for name, text in {"__init__.py": "", **files}.items():
            path = tmp_path / package / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(NOTING % str(noted) + text if name == "__init__.py" else text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), REPO]),
               TF_USE_LEGACY_KERAS=legacy)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["tensorflow []", "keras tf_keras jax scipy.sparse"]
    # by the probe, after: never before
    assert noted.read_text() == "keras\ntf_keras\njax\nscipy\n"
