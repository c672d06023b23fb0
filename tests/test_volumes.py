import pytest

from tfmesos.core.volumes import parse_volume
from tfmesos.exceptions import SpecError, TFMesosError


@pytest.mark.parametrize("text, expected", [
    ("/nfs/mnist:/nfs/mnist", ("/nfs/mnist", "/nfs/mnist", "RW")),
    ("/host/data:/data:ro", ("/host/data", "/data", "RO")),
    ("/host/data:/data:RO", ("/host/data", "/data", "RO")),
    ("/host/data:/data:rw", ("/host/data", "/data", "RW")),
    ("/host/data/:/data/", ("/host/data", "/data", "RW")),
    ("/a/./b/../c:/x//y", ("/a/c", "/x/y", "RW")),
    ("//double:/data", ("/double", "/data", "RW")),
    ("/:/host-root:ro", ("/", "/host-root", "RO")),
    ("/with space/dir:/in container", ("/with space/dir", "/in container", "RW")),
])
def test_valid_volumes(text, expected):
    assert parse_volume(text) == expected


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("/only-one-path", "no container path"),
    ("relative:/data", "host path 'relative' is not absolute"),
    ("/data:relative", "container path 'relative' is not absolute"),
    ("~/data:/data", "host path '~/data' is not absolute"),
    (":/data", "host path is empty"),
    ("/data:", "container path is empty"),
    ("/data:/data:rx", "unknown mode 'rx', use ro or rw"),
    ("/data:/data:", "unknown mode '', use ro or rw"),
    ("/a:/b:ro:extra", "too many ':'"),
    ("/data:/", "container path cannot be '/'"),
    ("/data:/data\n", "control characters"),
])
def test_invalid_volumes(text, message):
    with pytest.raises(SpecError, match=message) as info:
        parse_volume(text)
    text_of_error = str(info.value)
    assert "\n" not in text_of_error
    assert "HOST:CONTAINER[:ro|rw]" in text_of_error
    assert isinstance(info.value, (TFMesosError, ValueError))


def test_non_string_is_rejected():
    with pytest.raises(SpecError, match="expected a string"):
        parse_volume(None)
    with pytest.raises(SpecError, match="expected a string"):
        parse_volume(("/a", "/b"))
