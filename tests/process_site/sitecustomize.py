"""Imported at start by every Python process the test suite starts (tests/
conftest.py puts this directory first on their PYTHONPATH). It is the
suite's own, not tfmesos': a user's processes run as Python makes them.
Nothing here changes what a test asserts; it takes CPU the suite's ~100
TensorFlow processes spent on nothing they test, on a 2-core machine.

* At exit the interpreter's final garbage collections skip every object
  alive then: a TensorFlow process spent ~1.5 s of CPU walking TensorFlow's
  objects just before the OS frees them all. ``gc.freeze()`` as the last
  exit handler (registered first, so run last) takes that to ~0.2 s. What
  a process wrote through ``print``, ``logging`` or a closed file is
  flushed before (stdio at finalisation, logging by its own exit handler,
  which runs earlier).
* The packages named in ``$TFMESOS_TEST_HIDDEN_PACKAGES`` do not import:
  JAX, which the suite installs for its Keras-on-JAX and ``--jax`` tests,
  is hidden from the rest, as a TensorFlow user's environment has none
  (``import tensorflow`` imports JAX where it can, in
  tensorflow/lite/python/util.py: ~1 s of CPU a process). A test that
  needs it is marked ``@pytest.mark.jax``. So is IPython, installed for
  the notebook test (ipykernel), which Keras imports where it can
  (keras/src/saving/file_editor.py, at ``import tensorflow``: ~0.4 s of
  CPU a process): ``@pytest.mark.notebook``.
"""

import atexit
import gc
import os
import sys

atexit.register(gc.freeze)

_HIDDEN = frozenset(filter(None, os.environ.get("TFMESOS_TEST_HIDDEN_PACKAGES", "").split(",")))


class _Hidden:
    """A meta path finder that refuses the hidden packages, as if absent."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in _HIDDEN:
            raise ModuleNotFoundError(
                "No module named %r (hidden from this test's processes by tests/process_site; "
                "mark the test @pytest.mark.jax or @pytest.mark.notebook, "
                "tests/conftest.py's HIDDEN_BY_MARKER)" % name, name=name)
        return None


if _HIDDEN:
    sys.meta_path.insert(0, _Hidden())
