"""The local agents' fetcher cache and where they fetch from.

``FetcherCache`` is Mesos' fetcher cache (apache/mesos docs/fetcher.md,
src/launcher/fetcher.cpp) for one agent: a URI with ``cache: true`` is
downloaded into the cache the first time a task of that user asks for it,
and later tasks on the agent copy or extract it from there; competing
fetches of the same URI wait for the first download. The key is (user,
URI): a new URI is a new entry, as Mesos recommends ("use a fresh unique URI
whenever the resource's content has changed"). ``cache: false`` (or unset)
bypasses it. As Mesos' it holds at most ``size`` bytes (the agent flag
``--fetcher_cache_size``, 2 GiB by default), evicting the least recently
used entries no fetch is using (``Cache::reserve``, ``selectVictims``,
src/slave/containerizer/fetcher.cpp); a download counts once it is whole
(Mesos asks a URI's size first), and one that finds no room serves the
fetches that waited for it, then goes, as Mesos fetches it bypassing the
cache. An entry whose file is gone is downloaded again (``Cache::validate``).
Each user's entries live in a directory of their own, which
belongs to that user when the fetch runs as them (Mesos' per-user cache
directories, ``createCacheDirectory`` in src/launcher/fetcher.cpp).

``AgentFetcher`` is one agent's fetcher: through its cache, and from inside
the agent's network namespace (``netns.py``), so that a URI served at an
address only the agents reach (a scheduler in the hub) is fetched as a real
agent on that host would.
"""

import collections
import contextlib
import hashlib
import itertools
import os
import re
import threading
import urllib.parse

from .netns import call_in_namespace

# Mesos' agent flag --fetcher_cache_size: DEFAULT_FETCHER_CACHE_SIZE,
# Gigabytes(2) (src/slave/constants.hpp; stout's units are binary).
DEFAULT_FETCHER_CACHE_SIZE = 2 << 30
MAX_FETCHER_CACHE_SIZE = 1 << 50   # 1024TB, a bound for what the flag says
# Entries at most, so that its table stays bounded even by empty files.
MAX_ENTRIES = 4096


class _Entry:
    def __init__(self, key, path):
        self.key = key                   # (user, uri)
        self.path = path
        self.done = threading.Event()
        self.failed = False
        self.size = 0                    # bytes claimed, once downloaded and kept
        self.users = 0                   # fetches that hold it: Mesos' reference count
        self.kept = True                 # False: out of the table, gone with its last user


class FetcherCache:
    """The cache of one agent, in ``directory``, of at most ``size`` bytes
    (Mesos' ``--fetcher_cache_size``). ``downloads`` counts the downloads
    of each URI it holds (what the cache saved is the rest); ``used``: the
    bytes of its files."""

    def __init__(self, directory, size=DEFAULT_FETCHER_CACHE_SIZE):
        self.directory = directory
        self.size = size
        self.used = 0
        self._lock = threading.Lock()
        # (user, uri) -> its entry, the least recently used first.
        self._entries: collections.OrderedDict[tuple[str, str], _Entry] = \
            collections.OrderedDict()
        self._serial = itertools.count(1)
        self.downloads: collections.Counter[str] = collections.Counter()   # uri -> downloads

    @contextlib.contextmanager
    def use(self, uri, user, download, owner=None):
        """The cached file of ``uri`` for ``user``, never evicted until the
        ``with`` block is left; ``download(path)`` puts it at ``path`` the
        first time (its exception is the fetch's), in a directory that
        ``owner`` (a ``users.TaskUser``, who downloads it; None: this
        process) owns."""
        entry = self._hold(uri, user, download, owner)
        try:
            yield entry.path
        finally:
            self._release(entry)

    def _hold(self, uri, user, download, owner):
        key = (user or "", uri)
        while True:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None and entry.done.is_set() and not os.path.exists(entry.path):
                    # Gone (an operator cleaned the work directory): Mesos'
                    # Cache::get validates a downloaded entry ("Cache file
                    # does not exist", Cache::validate) and removes it, so the
                    # URI is downloaded again.
                    self._drop(entry)
                    entry = None
                first = entry is None
                if entry is None:
                    entry = self._entries[key] = _Entry(key, self._file_name(key))
                self._entries.move_to_end(key)
                entry.users += 1
            if not first:
                entry.done.wait()
                if entry.failed:
                    self._release(entry)
                    continue        # the first download failed: try it ourselves
                return entry
            try:
                _user_directory(os.path.dirname(entry.path), owner)
                partial = entry.path + ".partial"
                try:
                    download(partial)
                    os.replace(partial, entry.path)
                finally:
                    _remove(partial)
                size = os.lstat(entry.path).st_size
                with self._lock:
                    self.downloads[uri] += 1
                    self._claim(entry, size)
                return entry
            except BaseException:
                entry.failed = True
                with self._lock:
                    self._drop(entry)
                self._release(entry)
                raise
            finally:
                entry.done.set()

    def _claim(self, entry, size):
        """Room for ``entry``'s ``size`` bytes: the least recently used
        entries no fetch holds are evicted (Mesos' Cache::reserve and
        selectVictims); an entry that finds none (larger than the whole
        cache, or the rest in use) is not kept, as Mesos then fetches it
        bypassing the cache: it goes once its fetches are done."""
        room = self.size - self.used
        count = len(self._entries)
        victims = []
        for other in self._entries.values():
            if room >= size and count <= MAX_ENTRIES:
                break
            if other.users == 0:
                victims.append(other)
                room += other.size
                count -= 1
        if room < size:
            self._drop(entry)
            return
        for victim in victims:
            self._drop(victim)
        entry.size = size
        self.used += size

    def _drop(self, entry):
        """Take ``entry`` out of the table; its file goes now, or with its
        last user."""
        if entry.kept:                   # in the table until now
            del self._entries[entry.key]
            self.used -= entry.size
            entry.size = 0
            uri = entry.key[1]
            if not any(key[1] == uri for key in self._entries):
                self.downloads.pop(uri, None)
        entry.kept = False
        if entry.users == 0:
            _remove(entry.path)

    def _release(self, entry):
        with self._lock:
            entry.users -= 1
            if entry.users == 0 and not entry.kept:
                _remove(entry.path)

    def _file_name(self, key):
        """A name of its own per entry (a file a fetch still reads is never
        another entry's) that keeps the URI's basename, so that archives
        are still recognised by their extension when extracted (Mesos'
        Cache::nextFilename: a serial number, then the basename)."""
        base = os.path.basename(urllib.parse.urlparse(key[1]).path) or "download"
        return os.path.join(self.directory, _directory_name(key[0]),
                            "c%d-%s" % (next(self._serial), base))


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def _directory_name(user):
    """The name of ``user``'s cache directory: the user's name when it is
    a plain one (Mesos names it so), else one made of its digest."""
    if _SAFE_NAME.fullmatch(user):
        return user
    return "user-%s" % hashlib.sha256(user.encode()).hexdigest()[:16]


def _user_directory(path, owner):
    """Make ``path``, a user's cache directory; one ``owner`` downloads into
    is theirs, and theirs alone."""
    os.makedirs(path, exist_ok=True)
    if owner is not None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fchown(fd, owner.uid, owner.gid)
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)


class AgentFetcher:
    """``fetch(uris, sandbox, user)`` as the agent's fetcher: ``cache``
    (a FetcherCache), in network namespace ``netns`` (None: this host's)."""

    def __init__(self, cache, netns=None):
        self.cache = cache
        self.netns = netns

    def fetch(self, uris, sandbox, user=None, cancelled=None, run_as=None):
        """``fetcher.fetch_uris`` for a task of ``user``, as ``run_as``."""
        from .fetcher import fetch_uris

        def fetch():
            return fetch_uris(uris, sandbox, cache=self.cache, user=user, cancelled=cancelled,
                              run_as=run_as)
        return fetch() if self.netns is None else call_in_namespace(self.netns, fetch)


__all__ = ["FetcherCache", "AgentFetcher"]
