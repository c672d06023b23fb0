"""Docker image names, checked as the engine parses them (distribution's
reference grammar) before anything launches."""

import pytest

from tfmesos.core.image_names import image_name_error


@pytest.mark.parametrize("name", [
    "ubuntu", "tfmesos/tfmesos", "tfmesos/tfmesos:0.1", "nvidia/cuda:12.2.0-base-ubuntu22.04",
    "localhost:5000/ml/tfmesos:0.1", "registry.example.com:5000/ml/tfmesos",
    "Registry.Example.com/ml/tfmesos", "[::1]:5000/x", "a__b/c-d.e",
    "tfmesos/tfmesos@sha256:" + "0" * 64, "tfmesos/tfmesos:0.1@sha256:" + "a" * 64])
def test_references_the_engine_takes_pass(name):
    assert image_name_error(name) is None


@pytest.mark.parametrize("name", [
    "Bad/Image", "Bad/image", "Foo/bar", "foo:t\u0101g", "ubuntu@sha256:" + "A" * 64,
    "ubuntu@sha256:" + "a" * 32,
    "UPPER", "tfmesos/tfmesos:bad tag", "tfmesos/tfmesos@sha256:00", "a//b",
    "-leading", "trailing-", "tfmesos/tfmesos:" + "t" * 129, "x" * 256, "a b", ""])
def test_names_the_engine_refuses_are_refused_in_one_line(name):
    why = image_name_error(name)
    assert why is not None and "\n" not in why
