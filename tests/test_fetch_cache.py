"""The embedded agents' fetcher cache (mesos_local/containerizer/fetch_cache.py)
as Mesos' (src/slave/containerizer/fetcher.cpp): a hit whose file is gone is
downloaded again (``Cache::validate``)."""

import os

from mesos_local.containerizer.fetch_cache import FetcherCache
from mesos_local.containerizer.fetcher import fetch_uris


def cached_files(directory):
    """The files under a cache ``directory``: {name: size}."""
    return {name: os.path.getsize(os.path.join(top, name))
            for top, _, names in os.walk(directory) for name in names}


def source(tmp_path, name, size):
    path = tmp_path / "src" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(name.encode()[:1] * size)
    return "file://%s" % path


def fetch(tmp_path, cache, value, box):
    sandbox = tmp_path / box
    sandbox.mkdir()
    fetch_uris([{"value": value, "cache": True, "extract": False}], str(sandbox), cache=cache,
               user="alice")
    return sandbox / os.path.basename(value)


def test_an_entry_whose_file_was_removed_is_downloaded_again(tmp_path):
    # An operator cleaning the work directory made every later task with the
    # URI fail for good: "Failed to fetch 'file:///tmp/x.txt': [Errno 2] No
    # such file or directory: '.../fetcher-cache/root/9a45...-x.txt'".
    value = source(tmp_path, "x.txt", 10)
    cache = FetcherCache(str(tmp_path / "cache"))
    assert fetch(tmp_path, cache, value, "first").read_bytes() == b"x" * 10
    [name] = cached_files(tmp_path / "cache")
    os.remove(tmp_path / "cache" / "alice" / name)
    assert fetch(tmp_path, cache, value, "second").read_bytes() == b"x" * 10
    [name] = cached_files(tmp_path / "cache")
    cached = os.stat(tmp_path / "cache" / "alice" / name)
    assert fetch(tmp_path, cache, value, "third").read_bytes() == b"x" * 10
    assert os.stat(tmp_path / "cache" / "alice" / name).st_ino == cached.st_ino   # a hit
