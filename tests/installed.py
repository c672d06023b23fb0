"""``require(*packages)``: skip the calling test unless every package is
installed, found without importing it. ``pytest.importorskip`` imports it
into the pytest process, where a test whose tasks use the package has no
need of it: TensorFlow (and tf_keras, which imports it) ~8 s of CPU, torch
~2 s, scikit-learn, JAX and Lightning a second or more each, in every
pytest-xdist worker that ran such a test, and a heavier garbage collector
for the rest of its session."""

import importlib.util

import pytest


def require(*packages):
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip("not installed: %s" % ", ".join(missing))
