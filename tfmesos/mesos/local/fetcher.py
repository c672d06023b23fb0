"""The local agents' fetcher: a task's ``CommandInfo.uris``, downloaded or
copied into its sandbox (archives extracted) before the task starts."""

import os
import shutil
import urllib.parse

_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")


class FetchError(Exception):
    """A URI could not be fetched; the message goes into TASK_FAILED."""


def fetch_uris(uris, sandbox, timeout=60):
    """Mesos' fetcher, minus its cache: download or copy each URI into the
    sandbox, extract archives unless ``extract`` is false, chmod ``executable``."""
    # Imported here: most runs fetch nothing, and these cost start-up time.
    import tarfile
    import urllib.request
    import zipfile

    for uri in uris:
        value = uri["value"]
        parsed = urllib.parse.urlparse(value)
        name = uri.get("output_file") or os.path.basename(parsed.path) or "download"
        target = os.path.normpath(os.path.join(sandbox, name))
        if not target.startswith(os.path.normpath(sandbox) + os.sep):
            raise FetchError("output_file %r leaves the sandbox" % name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            if parsed.scheme in ("http", "https", "ftp"):
                with urllib.request.urlopen(value, timeout=timeout) as response, \
                        open(target, "wb") as out:
                    shutil.copyfileobj(response, out)
            else:
                path = parsed.path if parsed.scheme == "file" else value
                shutil.copyfile(path, target)
            if uri.get("executable"):
                os.chmod(target, 0o755)
            elif uri.get("extract", True) and target.endswith(_ARCHIVES):
                _extract(target, sandbox)
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
