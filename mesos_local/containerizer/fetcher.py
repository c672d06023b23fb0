"""The local agents' fetcher: a task's ``CommandInfo.uris``, downloaded or
copied into its sandbox (archives extracted) before the task starts."""

import os
import shutil
import urllib.parse

_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")


class FetchError(Exception):
    """A URI could not be fetched; the message goes into TASK_FAILED."""


def fetch_uris(uris, sandbox, timeout=60, cache=None, user=None):
    """Mesos' fetcher: download or copy each URI into the sandbox, extract
    archives unless ``extract`` is false, chmod ``executable``; URIs with
    ``cache: true`` go through ``cache`` (a ``fetch_cache.FetcherCache``)
    when there is one, for tasks of ``user``."""
    # Imported here: most runs fetch nothing, and these cost start-up time.
    import tarfile
    import zipfile

    for uri in uris:
        value = uri["value"]
        parsed = urllib.parse.urlparse(value)
        name = uri.get("output_file") or os.path.basename(parsed.path) or "download"
        target = os.path.normpath(os.path.join(sandbox, name))
        if not target.startswith(os.path.normpath(sandbox) + os.sep):
            raise FetchError("output_file %r leaves the sandbox" % name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if uri.get("cache") and cache is not None:
            _fetch_through_cache(uri, target, sandbox, cache, user, timeout)
            continue
        try:
            _download(value, target, timeout)
            if uri.get("executable"):
                os.chmod(target, 0o755)
            elif uri.get("extract", True) and target.endswith(_ARCHIVES):
                _extract(target, sandbox)
        except (OSError, ValueError, tarfile.TarError, zipfile.BadZipFile) as exc:
            raise FetchError("Failed to fetch '%s': %s" % (value, exc)) from exc


def _download(value, target, timeout):
    import urllib.request

    parsed = urllib.parse.urlparse(value)
    if parsed.scheme in ("http", "https", "ftp"):
        with urllib.request.urlopen(value, timeout=timeout) as response, \
                open(target, "wb") as out:
            shutil.copyfileobj(response, out)
    else:
        shutil.copyfile(parsed.path if parsed.scheme == "file" else value, target)


def _fetch_through_cache(uri, target, sandbox, cache, user, timeout):
    """As Mesos' fetchFromCache: an archive is extracted from the cache (only
    what it holds lands in the sandbox), anything else copied."""
    import tarfile
    import zipfile

    value = uri["value"]
    try:
        source = cache.get(value, user, lambda path: _download(value, path, timeout))
        if not uri.get("executable") and uri.get("extract", True) \
                and target.endswith(_ARCHIVES):
            _extract(source, sandbox)
            return
        shutil.copyfile(source, target)
        if uri.get("executable"):
            os.chmod(target, 0o755)
    except (OSError, ValueError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise FetchError("Failed to fetch '%s': %s" % (value, exc)) from exc


def _extract(archive_path, sandbox):
    import tarfile
    import zipfile

    if archive_path.endswith(".zip"):
        with zipfile.ZipFile(archive_path) as archive:
            archive.extractall(sandbox)
    else:
        with tarfile.open(archive_path) as archive:
            archive.extractall(sandbox, filter="data")


__all__ = ["FetchError", "fetch_uris"]
