"""The local agents' fetcher cache and where they fetch from.

``FetcherCache`` is Mesos' fetcher cache (apache/mesos docs/fetcher.md,
src/launcher/fetcher.cpp) for one agent: a URI with ``cache: true`` is
downloaded into the cache the first time a task of that user asks for it,
and later tasks on the agent copy or extract it from there; competing
fetches of the same URI wait for the first download. The key is (user,
URI): a new URI is a new entry, as Mesos recommends ("use a fresh unique URI
whenever the resource's content has changed"). ``cache: false`` (or unset)
bypasses it. Unlike Mesos' it never evicts: the cache goes with the master's
work directory. Each user's entries live in a directory of their own, which
belongs to that user when the fetch runs as them (Mesos' per-user cache
directories, ``createCacheDirectory`` in src/launcher/fetcher.cpp).

``AgentFetcher`` is one agent's fetcher: through its cache, and from inside
the agent's network namespace (``netns.py``), so that a URI served at an
address only the agents reach (a scheduler in the hub) is fetched as a real
agent on that host would.
"""

import collections
import hashlib
import os
import re
import threading
import urllib.parse

from .netns import call_in_namespace


class _Entry:
    def __init__(self, path):
        self.path = path
        self.done = threading.Event()
        self.failed = False


class FetcherCache:
    """The cache of one agent, in ``directory``. ``downloads`` counts the
    downloads of each URI (what the cache saved is the rest)."""

    def __init__(self, directory):
        self.directory = directory
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], _Entry] = {}   # (user, uri) -> its file
        self.downloads: collections.Counter[str] = collections.Counter()   # uri -> downloads

    def get(self, uri, user, download, owner=None):
        """The cached file of ``uri`` for ``user``; ``download(path)`` puts
        it at ``path`` the first time (its exception is the fetch's), in a
        directory that ``owner`` (a ``users.TaskUser``, who downloads it;
        None: this process) owns."""
        key = (user or "", uri)
        while True:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None and entry.done.is_set() and not os.path.exists(entry.path):
                    # Gone (an operator cleaned the work directory): Mesos'
                    # Cache::get validates a downloaded entry ("Cache file
                    # does not exist", Cache::validate) and removes it, so the
                    # URI is downloaded again.
                    del self._entries[key]
                    entry = None
                first = entry is None
                if entry is None:
                    entry = self._entries[key] = _Entry(self._file_name(key))
            if not first:
                entry.done.wait()
                if entry.failed:
                    continue        # the first download failed: try it ourselves
                return entry.path
            try:
                _user_directory(os.path.dirname(entry.path), owner)
                partial = entry.path + ".partial"
                download(partial)
                os.replace(partial, entry.path)
                with self._lock:
                    self.downloads[uri] += 1
                return entry.path
            except BaseException:
                entry.failed = True
                with self._lock:
                    del self._entries[key]
                raise
            finally:
                entry.done.set()

    def _file_name(self, key):
        """A name per key that keeps the URI's basename, so that archives
        are still recognised by their extension when extracted."""
        digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
        base = os.path.basename(urllib.parse.urlparse(key[1]).path) or "download"
        return os.path.join(self.directory, _directory_name(key[0]), "%s-%s" % (digest, base))


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
