"""The embedded agents' fetcher cache (mesos_local/containerizer/fetch_cache.py)
as Mesos' (src/slave/containerizer/fetcher.cpp): a hit whose file is gone is
downloaded again (``Cache::validate``), and the cache holds at most its size
(the agent flag ``--fetcher_cache_size``), evicting the least recently used
entries no fetch is using (``selectVictims``)."""

import os
import threading

import pytest
from fixtures_master import clients, make_local_master  # fixtures
from mesos_http_client import task_info

from mesos_local.command_line import build_parser
from mesos_local.containerizer import fetch_cache
from mesos_local.containerizer.fetch_cache import FetcherCache
from mesos_local.containerizer.fetcher import fetch_uris

KB = 1024


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


def test_the_least_recently_used_entries_go_to_keep_the_cache_within_its_size(tmp_path):
    # Every tfrun --ship run serves its bundle at a new URL: each left a copy.
    cache = FetcherCache(str(tmp_path / "cache"), size=10 * KB)
    a, b, c = (source(tmp_path, name, 4 * KB) for name in ("a.bin", "b.bin", "c.bin"))
    fetch(tmp_path, cache, a, "1")
    fetch(tmp_path, cache, b, "2")
    fetch(tmp_path, cache, a, "3")         # a is used again: b is the least recent
    fetch(tmp_path, cache, c, "4")
    assert sorted(cached_files(tmp_path / "cache").values()) == [4 * KB, 4 * KB]
    assert set(cache.downloads) == {a, c} and cache.used == 8 * KB
    fetch(tmp_path, cache, a, "5")
    assert cache.downloads[a] == 1         # still cached
    for i in range(6):
        fetch(tmp_path, cache, source(tmp_path, "run%d.bin" % i, 4 * KB), "run%d" % i)
        assert sum(cached_files(tmp_path / "cache").values()) <= 10 * KB
    assert len(cache.downloads) == 2 and cache.used == 8 * KB


def test_an_entry_a_fetch_is_using_is_not_evicted(tmp_path):
    cache = FetcherCache(str(tmp_path / "cache"), size=10 * KB)

    def filler(size):
        return lambda path: open(path, "wb").write(b"z" * size)
    with cache.use("http://h/held", "alice", filler(6 * KB)) as held:
        # No room beside the held entry: this one is used, not kept.
        with cache.use("http://h/other", "alice", filler(6 * KB)) as other:
            assert os.path.getsize(other) == 6 * KB
        assert not os.path.exists(other) and os.path.getsize(held) == 6 * KB
    # Released, the held entry is the one to go for a new one.
    with cache.use("http://h/new", "alice", filler(6 * KB)):
        pass
    assert sorted(cache.downloads) == ["http://h/new"] and cache.used == 6 * KB
    assert list(cached_files(tmp_path / "cache").values()) == [6 * KB]


def test_an_entry_larger_than_the_cache_is_fetched_and_not_kept(tmp_path):
    # Mesos fetches it bypassing the cache.
    cache = FetcherCache(str(tmp_path / "cache"), size=4 * KB)
    small, big = source(tmp_path, "small.bin", 2 * KB), source(tmp_path, "big.bin", 8 * KB)
    fetch(tmp_path, cache, small, "1")
    assert fetch(tmp_path, cache, big, "2").read_bytes() == b"b" * 8 * KB
    assert list(cached_files(tmp_path / "cache").values()) == [2 * KB]   # small stayed
    assert set(cache.downloads) == {small} and cache.used == 2 * KB


def test_fetches_of_one_uri_wait_for_one_download_that_stays_until_the_last_is_done(tmp_path):
    cache = FetcherCache(str(tmp_path / "cache"), size=4 * KB)
    started, finish = threading.Event(), threading.Event()
    calls = []

    def slow(path):
        calls.append(path)
        started.set()
        finish.wait(10)
        with open(path, "wb") as handle:
            handle.write(b"s" * 8 * KB)   # larger than the cache: not kept
    seen = []

    def task():
        with cache.use("http://h/slow", "alice", slow) as path:
            seen.append(os.path.getsize(path))
    threads = [threading.Thread(target=task) for _ in range(3)]
    for thread in threads:
        thread.start()
    started.wait(10)
    finish.set()
    for thread in threads:
        thread.join(10)
    assert len(calls) == 1 and seen == [8 * KB] * 3
    assert cached_files(tmp_path / "cache") == {} and cache.used == 0


def test_the_table_is_bounded_even_by_empty_files(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch_cache, "MAX_ENTRIES", 3)
    cache = FetcherCache(str(tmp_path / "cache"))
    for i in range(10):
        fetch(tmp_path, cache, source(tmp_path, "e%d" % i, 0), "e%d" % i)
    assert len(cache.downloads) == 3 and len(cached_files(tmp_path / "cache")) == 3


def test_the_default_size_is_mesos_and_the_command_line_sets_it():
    # DEFAULT_FETCHER_CACHE_SIZE = Gigabytes(2), src/slave/constants.hpp.
    assert fetch_cache.DEFAULT_FETCHER_CACHE_SIZE == 2 * 1024 ** 3
    parser = build_parser("tfmesos local-master")
    assert parser.parse_args([]).fetcher_cache_size == 2 * 1024 ** 3
    for text, size in (("100MB", 100 * 1024 ** 2), ("2gb", 2 * 1024 ** 3), ("0B", 0),
                       ("4096B", 4096)):
        assert parser.parse_args(["--fetcher-cache-size", text]).fetcher_cache_size == size
    assert "default: 2GB, as Mesos" in " ".join(parser.format_help().split())


# stout's Bytes::parse: a number without a unit is "Invalid bytes".
@pytest.mark.parametrize("text", ["1.5GB", "-1B", "2PB", "lots", "", "4096"])
def test_a_fetcher_cache_size_mesos_would_not_read_is_a_usage_error(text, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser("tfmesos local-master").parse_args(["--fetcher-cache-size", text])
    assert exited.value.code == 2
    assert "--fetcher-cache-size: " in capsys.readouterr().err


@pytest.mark.parametrize("size", [-1, 1.5, True, "2GB"])
def test_the_embedded_master_refuses_a_fetcher_cache_size_that_is_no_bytes(size):
    from mesos_local import LocalMaster
    with pytest.raises(ValueError, match=r"LocalMaster\(fetcher_cache_size="):
        LocalMaster(fetcher_cache_size=size)


def test_the_masters_agents_keep_their_cache_within_its_size_and_refetch_what_went(
        tmp_path, make_local_master, clients):
    master = make_local_master(fetcher_cache_size=6 * KB, work_dir=str(tmp_path / "work"))
    client = clients(master)
    values = [source(tmp_path, name, 4 * KB) for name in ("one.bin", "two.bin")]
    for task_id, value in (("t1", values[0]), ("t2", values[1]), ("t3", values[1])):
        if task_id == "t3":   # an operator cleans the work directory
            for top, _, names in os.walk(tmp_path / "work"):
                for name in names:
                    if "fetcher-cache" in top:
                        os.remove(os.path.join(top, name))
        offer = client.next_offers()[0]
        info = task_info(task_id, offer, "test -s %s" % os.path.basename(value))
        info["command"]["uris"] = [{"value": value, "cache": True}]
        client.launch(offer, [info], filters={"refuse_seconds": 0})
        client.wait_state(task_id, "TASK_FINISHED", timeout=30)
        caches = [top for top, _, _ in os.walk(tmp_path / "work")
                  if os.path.basename(top) == "fetcher-cache"]
        assert sum(sum(cached_files(top).values()) for top in caches) == 4 * KB
