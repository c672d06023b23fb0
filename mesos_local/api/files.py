"""The agents' ``/files`` endpoints, as a Mesos agent serves its sandboxes
(``FilesProcess``, src/files/files.cpp; docs/endpoints/files/read.md and
browse.md), each local agent on its own server (``agent_http.py``). The
master serves ``/files`` and the operator's ``READ_FILE``/``LIST_FILES``
too, with nothing attached (``nothing_attached``): a Mesos master attaches
only its own log, ``/master/log``, and only with ``--log_dir`` or
``--external_log_file``, neither set by default (``Master::initialize``,
src/master/master.cpp), so a sandbox path there is 404, as a client that
reads a sandbox from the master finds on a cluster.

* ``GET /files/read?path=P&offset=N&length=M``: ``{"offset": N, "data":
  "..."}``; ``offset`` absent or -1: ``{"offset": <the file's size>,
  "data": ""}``; ``length`` absent or -1: to the end; a read is capped at
  16 pages (64 KiB), as files.cpp caps it;
* ``GET /files/browse?path=DIR``: a JSON array of ``{path, size, mode,
  mtime, nlink, uid, gid}`` (``model(FileInfo)``, src/common/http.cpp),
  sorted by name.

Each task's sandbox is attached, as src/slave/slave.cpp attaches an
executor's run directory (``Framework::addExecutor``), at its real path
``<work_dir>/slaves/<agent id>/frameworks/<framework id>/executors/
<executor id>/runs/<container id>`` (what ``/state`` names its
``directory``), the newest run also at ``.../runs/latest`` and at the
virtual path ``/frameworks/<framework id>/executors/<executor id>/runs/latest``
(a command task's executor id is its task id); nothing else is served. A path
is resolved as ``FilesProcess::resolve`` does: the attached directory plus
the rest, canonicalized, and refused (400) when that leaves the directory
(``..``, a symlink out of it); unknown paths are 404, a bad ``offset`` or
``length`` 400, a path no file can have (a NUL byte) 400 with one line.

What a task does in its sandbox meanwhile cannot lead the agent (root,
often) out of it: the canonical path is opened again from the attached
directory one name at a time, ``O_PATH | O_NOFOLLOW`` (a link found there
now: 400), and only a regular file is then opened for reading, and a
directory for listing, through that very descriptor
(``/proc/self/fd/N``): a FIFO, a device or a socket is refused (400)
without ever being opened, so a name swapped between a file and a link to
a FIFO outside cannot make the agent open that FIFO.

``?jsonp=f`` wraps the JSON as the read endpoints do
(``endpoints.json_reply``); a callback that is not a JavaScript identifier
path (``[A-Za-z_$][\\w$.]*``) is refused with 400, so no caller can make
this origin serve script of its choosing.

The HTTP server asks for credentials first when the master has them (as an
agent started with ``--authenticate_http_readonly``): unlike the master's
read endpoints, a sandbox holds what tasks print, which may be secret.
"""

import grp
import json
import os
import pwd
import stat

from .endpoints import JSON_TYPE, Reply, bad_callback

READ_PATH = "/files/read"
BROWSE_PATH = "/files/browse"
PATHS = (READ_PATH, BROWSE_PATH)

try:
    PAGE_SIZE = os.sysconf("SC_PAGESIZE")
except (ValueError, OSError, AttributeError):
    PAGE_SIZE = 4096
MAX_READ = 16 * PAGE_SIZE          # "Cap the read length at 16 pages" (files.cpp)

_FILE_TYPES = ((stat.S_ISREG, "-"), (stat.S_ISDIR, "d"), (stat.S_ISCHR, "c"),
               (stat.S_ISBLK, "b"), (stat.S_ISFIFO, "p"), (stat.S_ISLNK, "l"),
               (stat.S_ISSOCK, "s"))
_PERMISSIONS = (stat.S_IRUSR, stat.S_IWUSR, stat.S_IXUSR, stat.S_IRGRP, stat.S_IWGRP,
                stat.S_IXGRP, stat.S_IROTH, stat.S_IWOTH, stat.S_IXOTH)


class FilesError(Exception):
    """A request files.cpp refuses: ``status`` 400 or 404, the message."""

    def __init__(self, status, message=""):
        super().__init__(message)
        self.status = status


LATEST = "latest"   # paths.cpp: LATEST_SYMLINK


def nothing_attached(framework_id, executor_id, run=None):
    """What a Mesos master attaches to its ``/files`` of the tasks'
    sandboxes: nothing (see above)."""
    return None


def virtual_path(framework_id, executor_id):
    """Where an executor's sandbox is attached (``paths::getExecutorVirtualPath``,
    src/slave/paths.cpp)."""
    return "/frameworks/%s/executors/%s/runs/%s" % (framework_id, executor_id, LATEST)


def reply(route, query, attached):
    """The Reply to GET ``route`` (one of ``PATHS``) with ``query`` (a dict);
    ``attached(framework_id, executor_id, run=LATEST)`` is that sandbox's
    directory (of its run ``run``, a container id), or None."""
    refused = bad_callback(query)
    if refused is not None:
        return refused
    callback = query.get("jsonp")
    path = query.get("path")
    if not path:
        return Reply(400, b"Expecting 'path=value' in query.\n")
    try:
        if route == READ_PATH:
            document = read(path, query.get("offset"), query.get("length"), attached)
        else:
            document = browse(path, attached)
    except FilesError as exc:
        return Reply(exc.status, str(exc).encode("utf-8"))
    return _json(document, callback)


def _json(document, callback):
    """JSON whose strings may hold any bytes (``surrogateescape``): as Mesos
    writes a file's bytes into ``data`` unchanged."""
    body = json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogateescape")
    if callback:
        return Reply(200, b"%s(%s);" % (callback.encode("ascii"), body), "text/javascript")
    return Reply(200, body, JSON_TYPE)


def _number(name, text):
    """``numify``: an int >= -1 (None when absent), else FilesError (400)."""
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        raise FilesError(400, "Failed to parse %s: Failed to convert '%s' to number.\n"
                         % (name, text)) from None
    if value < -1:
        raise FilesError(400, "Negative %s provided: %d.\n" % (name, value))
    return value


def read(path, offset_text, length_text, attached):
    """``FilesProcess::__read``: the ``{"offset", "data"}`` document."""
    offset = _number("offset", offset_text)
    offset = -1 if offset is None else offset
    length = _number("length", length_text)
    if length == -1:
        length = None                 # to the end, as if absent
    if offset == -1:                  # the file's size only
        size, data = read_bytes(path, 0, 0, attached)
        return {"offset": size, "data": ""}
    size, data = read_bytes(path, offset, length, attached)
    return {"offset": offset, "data": data.decode("utf-8", "surrogateescape")}


def read_bytes(path, offset, length, attached):
    """``FilesProcess::_read``: (the file's size, at most ``length`` bytes
    (None: to the end; capped at ``MAX_READ``) from ``offset``), both ints
    >= 0; FilesError (400, 404) as files.cpp refuses. The operator API's
    READ_FILE answers with this too (``Master::Http::readFile``)."""
    handle, info = _lookup(path, attached)
    try:
        if stat.S_ISDIR(info.st_mode):
            raise FilesError(400, "Cannot read a directory.\n")
        if not stat.S_ISREG(info.st_mode):     # a FIFO would never end
            raise FilesError(400, "Cannot read '%s': not a regular file.\n" % path)
        fd = _reopen(handle, _READ, path)
    finally:
        os.close(handle)
    try:
        data = b""
        if offset < info.st_size and length != 0:
            wanted = info.st_size - offset if length is None else length
            data = os.pread(fd, min(wanted, MAX_READ), offset)
    finally:
        os.close(fd)
    return info.st_size, data


def browse(path, attached):
    """``FilesProcess::browse``: the entries of the directory at ``path``
    (of a file: none, as ``os::ls`` fails), each ``stat`` as Mesos does,
    as ``/files/browse`` shows them (``model(FileInfo)``)."""
    return [file_info(name, info) for name, info in listing(path, attached)]


def listing(path, attached):
    """(virtual path, ``os.stat_result``) of each entry of the directory at
    ``path``, sorted by name (``FilesProcess::browse``); FilesError (400,
    404) as files.cpp refuses. The operator API's LIST_FILES answers with
    these as ``FileInfo`` messages (``file_info_message``)."""
    handle, info = _lookup(path, attached)
    try:
        if stat.S_ISREG(info.st_mode):
            return []
        if not stat.S_ISDIR(info.st_mode):
            raise FilesError(400, "Cannot browse '%s': not a regular file or a directory.\n"
                             % path)
        fd = _reopen(handle, _READ | os.O_DIRECTORY, path)
    finally:
        os.close(handle)
    try:
        names = os.listdir(fd)
        base = path.rstrip("/")
        entries = []
        for name in sorted(names):
            try:
                info = os.stat(name, dir_fd=fd)
            except OSError:
                continue              # gone since it was listed
            entries.append(("%s/%s" % (base, name), info))
    finally:
        os.close(fd)
    return entries


def file_info(path, info):
    """``model(FileInfo)`` (src/common/http.cpp) of ``createFileInfo``
    (src/common/protobuf_utils.cpp): owner and group by name when known."""
    kind = next((letter for test, letter in _FILE_TYPES if test(info.st_mode)), "-")
    bits = "".join(letter if info.st_mode & mask else "-"
                   for mask, letter in zip(_PERMISSIONS, "rwxrwxrwx"))
    return {"path": path, "nlink": info.st_nlink, "size": info.st_size,
            "mtime": float(int(info.st_mtime)), "mode": kind + bits,
            "uid": _name(pwd.getpwuid, info.st_uid, "pw_name"),
            "gid": _name(grp.getgrgid, info.st_gid, "gr_name")}


def file_info_message(path, info):
    """The ``FileInfo`` message (include/mesos/v1/mesos.proto) in JSON, as
    ``createFileInfo`` (src/common/protobuf_utils.cpp) fills it: ``mode``
    the whole ``st_mode``, ``mtime`` whole seconds as a ``TimeInfo``."""
    return {"path": path, "nlink": info.st_nlink, "size": info.st_size,
            "mtime": {"nanoseconds": int(info.st_mtime) * 1000000000},
            "mode": info.st_mode,
            "uid": _name(pwd.getpwuid, info.st_uid, "pw_name"),
            "gid": _name(grp.getgrgid, info.st_gid, "gr_name")}


def _name(lookup, number, field):
    try:
        return getattr(lookup(number), field)
    except KeyError:
        return str(number)


def resolve(path, attached):
    """(the attached directory, the real path) of ``path``
    (``FilesProcess::resolve``): 404 when nothing is attached there or it
    does not exist, 400 when it leads out of the attached directory or
    cannot be a path."""
    _check_path(path)
    if path.startswith("file://"):          # path::from_uri
        path = path[len("file://"):]
    parts = path.rstrip("/").split("/")
    directory, rest = _attached_at(parts, attached)
    if directory is None:
        raise FilesError(404)
    root = os.path.realpath(directory)
    if not os.path.isdir(root):
        raise FilesError(404)
    joined = os.path.join(root, *rest)
    try:
        real = os.path.realpath(joined)
    except OSError as exc:            # a link swapped for a file while read (EINVAL)
        raise FilesError(400, "Failed to determine canonical path of '%s': %s.\n"
                         % (path, exc.strerror)) from None
    _check_inside(root, real, path)
    if not os.path.exists(real):
        raise FilesError(404)
    return root, real


def _attached_at(parts, attached):
    """(the directory attached at the longest prefix of ``parts``, the
    names after it), or (None, None). Each run of an executor is attached
    as a Mesos agent attaches it (``Framework::addExecutor``,
    src/slave/slave.cpp): its real path ``.../executors/<executor id>/
    runs/<container id>``, ``.../runs/latest`` and the virtual
    ``/frameworks/<framework id>/executors/<executor id>/runs/latest``
    (``virtual_path``); ``attached(framework_id, executor_id, run)`` is
    the run's directory (``run``: a container id, or ``latest``)."""
    for end in range(len(parts), 6, -1):          # the longest prefix first
        prefix = parts[:end]
        if prefix[-6] != "frameworks" or prefix[-4] != "executors" or prefix[-2] != "runs":
            continue
        framework_id, executor_id, run = prefix[-5], prefix[-3], prefix[-1]
        if prefix[:-6] == [""]:                     # the virtual path
            directory = attached(framework_id, executor_id) if run == LATEST else None
        else:
            directory = attached(framework_id, executor_id, run)
            # a real path: the very one this run has (its runs/ names it)
            if directory is not None and "/".join(prefix) != os.path.join(
                    os.path.dirname(directory), run):
                directory = None
        if directory is not None:
            return directory, parts[end:]
    return None, None


def _check_inside(root, real, path):
    if real != root and not real.startswith(root + os.sep):
        raise FilesError(400, "'%s' is inaccessible.\n" % path)


def _check_path(path):
    """FilesError (400) when ``path`` cannot name a file: a NUL byte, or
    text no file name is (a lone surrogate, from JSON); os.path and os.open
    would raise ValueError and UnicodeEncodeError."""
    if "\0" in path:
        why = "a path cannot hold a NUL byte"
    else:
        try:
            os.fsencode(path)
            return
        except UnicodeEncodeError:
            why = "not a file name"
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in path)
    raise FilesError(400, "Invalid path '%s': %s.\n" % (shown, why))


_PATH = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC          # a name, never what it opens
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _lookup(path, attached):
    """(an ``O_PATH`` descriptor, its stat) of what virtual ``path`` names:
    its canonical path (``resolve``) walked again from the attached
    directory, name by name, following no link. A name a task swapped for
    a link since ``resolve`` is a 400, one it removed a 404."""
    root, real = resolve(path, attached)
    rest = os.path.relpath(real, root)
    fd = _open_name(root, None, path)
    try:
        for name in ([] if rest == os.curdir else rest.split(os.sep)):
            child = _open_name(name, fd, path)
            os.close(fd)
            fd = child
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise FilesError(400, "'%s' is inaccessible.\n" % path)
        return fd, os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise


def _open_name(name, dir_fd, path):
    """An ``O_PATH`` descriptor of ``name`` (in directory ``dir_fd``): of a
    link, the link itself."""
    try:
        return os.open(name, _PATH, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        raise FilesError(404) from None
    except OSError as exc:
        raise FilesError(500, "Failed to open file at '%s': %s.\n"
                         % (path, exc.strerror)) from None


def _reopen(handle, flags, path):
    """A descriptor of the very file ``handle`` (``O_PATH``) names, opened
    with ``flags`` through ``/proc/self/fd``: no name is looked up again."""
    try:
        return os.open("/proc/self/fd/%d" % handle, flags)
    except OSError as exc:
        raise FilesError(500, "Failed to open file at '%s': %s.\n"
                         % (path, exc.strerror)) from None


__all__ = ["PATHS", "READ_PATH", "BROWSE_PATH", "MAX_READ", "virtual_path", "reply", "read",
           "read_bytes", "browse", "listing", "file_info_message", "resolve", "FilesError"]
