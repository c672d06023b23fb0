"""``require(*packages)``: skip the calling test unless every package is
installed, found without importing it. ``pytest.importorskip`` imports it
into the pytest process, where a test whose tasks use the package has no
need of it: TensorFlow (and tf_keras, which imports it) ~8 s of CPU, torch
~2 s, scikit-learn, JAX and Lightning a second or more each, in every
pytest-xdist worker that ran such a test, and a heavier garbage collector
for the rest of its session.

Found on ``sys.path`` by the path finder itself, past the suite's process
site, which hides JAX from pytest's own workers too (tests/process_site):
``importorskip("jax")`` skipped the JAX tests there, in every CI run, though
JAX is installed and their tasks, marked ``jax``, see it."""

import importlib.machinery

import pytest


def require(*packages):
    missing = [name for name in packages
               if importlib.machinery.PathFinder.find_spec(name) is None]
    if missing:
        pytest.skip("not installed: %s" % ", ".join(missing))
