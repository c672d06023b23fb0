"""The check of what a task fetched, written into its command (issue 35,
item 9): nothing a task fetches runs unless its sha256 is the one the
scheduler put in the TaskInfo.

What a task fetches comes over plain HTTP (tfrun's ``BundleServer``, an
agent's fetcher cache): a proxy, a poisoned cache or anyone on the path
can change it. The TaskInfo's command does not: it reaches the agent over
the scheduler's channel to the master, and it is what the agent runs. So
the expected digests travel in the command's own text, and the code that
compares them is written there too, not fetched: ``check_command`` is a
POSIX shell prefix that, for each fetched file (``Fetched``), runs
``sha256sum`` (coreutils; busybox has one too; for a file of ``BIG``
bytes or more ``openssl dgst -sha256`` where it works, several times
faster) on the file in the sandbox, compares with the digest written
after its name, and on the first difference prints one line to stderr
and exits ``REFUSED``::

    tfmesos: tfmesos-task-0123abcd.zip sha256 <got> != expected <want>: refusing to run it

The task ends TASK_FAILED ("Command exited with status 65"); tfrun reads
that line from the sandbox (``core.sandbox_tails``) and fails the run with
it at once (``core.task_ends.refused_fetch``): fetching through the same
path again cannot help. Only once every file checks does the command
extract the archives it unpacks itself (``Fetched.unpack``) and ``exec``
the interpreter.

Why the shell, not Python: the interpreter may itself be fetched (a
``--python-env`` archive, whose ``bin/python3`` runs the task), and a
check cannot vouch for the program that runs it; ``sha256sum`` and ``tar``
are the agent's (or the image's), as the shell is. Nor in the task
entry's interpreter where that one is not fetched: the check would then
be two checks, and the entry's command line (``-m tfmesos.task``, which
tools find tasks by) would change. It adds no Python start to the task
(about 20 ms each): one ``sha256sum`` process of about a millisecond a
small file, and a ``tar`` for what is extracted, which the agent's fetcher
did before.

What the agent's fetcher extracts from its cache (``cache: true``,
``extract: true``) never lands in the sandbox as an archive
(apache/mesos src/launcher/fetcher.cpp, ``fetchFromCache`` extracts the
cache's copy in place), so there would be nothing to check: archives that
are cached come with ``extract: false`` (``fetchFromCache`` copies them
into the sandbox) and the command extracts them once checked. An archive
fetched without the cache (``fetchBypassingCache``: downloaded into the
sandbox, extracted there, the archive kept), as the detached scheduler's
files are, may be extracted by the fetcher: its archive is checked before
anything of it runs.

Not checked: a ``--python-env`` given as a URL (tfrun never sees its
bytes; its integrity is that URL's, https for one) and what an image
brings (the registry's).
"""

import dataclasses
import re
import shlex
from collections.abc import Iterable
from typing import Optional

REFUSED = 65          # the command's exit status when a fetched file is refused (EX_DATAERR)
SANDBOX = '"$_tfm_d"'   # the sandbox, in the command, once the check set it
# The one line a refusal prints (``check_command``), as tfrun reads it back.
REFUSAL = re.compile(r"tfmesos: (?P<name>.+?) sha256 (?P<got>\S+) != expected "
                     r"(?P<want>[0-9a-f]{64}): refusing to run it")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# tar's flag for each compressed archive the fetcher would extract
# (src/launcher/fetcher.cpp, ``extract``), given explicitly: busybox' tar
# does not always detect the compression itself.
_TAR = ((".tar.gz", "z"), (".tgz", "z"), (".tar.bz2", "j"), (".tbz2", "j"),
        (".tar.xz", "J"), (".txz", "J"), (".tar", ""))


@dataclasses.dataclass(frozen=True)
class Fetched:
    """A file the task finds in its sandbox as ``name``, whose sha256 must
    be ``sha256``; ``unpack``: whether the command extracts it (into the
    sandbox, once every file checked) as the fetcher would have; ``size``:
    its bytes (0: unknown), which choose the program that hashes it
    (``BIG``)."""

    name: str
    sha256: str
    unpack: bool = False
    size: int = 0

    def __post_init__(self):
        if not self.name or "/" in self.name or self.name in (".", ".."):
            raise ValueError("Fetched: %r is not a file name" % (self.name,))
        if not _SHA256.fullmatch(self.sha256):
            raise ValueError("Fetched: %r is not a sha256 in hex" % (self.sha256,))
        if self.unpack and unpack_command(self.name) is None:
            raise ValueError("Fetched: %s is not an archive the command can extract"
                             % self.name)


def unpack_command(name: str, big: bool = False) -> Optional[str]:
    """The shell command that extracts the archive ``name`` of the sandbox
    into the sandbox, or None for a name that is no such archive: ``tar``
    (``-o``: owned by the task's user, not by the archive's owners, as the
    fetcher's libarchive does), ``unzip`` for a zip. ``big``: a tar reads
    and writes in records of ``$_tfm_b`` (``_BIG_TAR_PRELUDE``)."""
    path = "%s/%s" % (SANDBOX, shlex.quote(name))
    if name.lower().endswith(".zip"):
        return "unzip -qo %s -d %s" % (path, SANDBOX)
    flag = _tar_flag(name)
    if flag is None:
        return None
    return "tar %s-x%sof %s -C %s" % ("$_tfm_b " if big else "", flag, path, SANDBOX)


def _tar_flag(name: str) -> Optional[str]:
    """tar's compression flag for the archive ``name`` ("" for a plain
    ``.tar``), or None for a name that is no tar archive."""
    lower = name.lower()
    return next((flag for suffix, flag in _TAR if lower.endswith(suffix)), None)


# The prefix's fixed part: the sandbox, sha256sum's presence, and the check
# of one file (``_tfm_c NAME SHA256 [PROGRAM]``, PROGRAM reading the file on
# its stdin and writing "HEX ..." as sha256sum does; unquoted: its words
# split). ``2>/dev/null`` first: a file that cannot be opened is said in
# tfmesos' line, not in the shell's own.
_PRELUDE = (
    '_tfm_d="${MESOS_SANDBOX:-$PWD}"; '
    'command -v sha256sum >/dev/null 2>&1 || { echo "tfmesos: this agent has no sha256sum '
    '(coreutils) to check the files the task fetched: refusing to run them" >&2; exit %d; }; '
    '_tfm_c(){ _tfm_h=$(${3:-sha256sum} 2>/dev/null <"$_tfm_d/$1") && '
    '_tfm_h=${_tfm_h%%%% *}; '
    '[ "$_tfm_h" = "$2" ] || { echo "tfmesos: $1 sha256 ${_tfm_h:-(unreadable)} != expected '
    '$2: refusing to run it" >&2; exit %d; }; }; ' % (REFUSED, REFUSED))
# A file this big is hashed by OpenSSL where it works: coreutils' sha256sum
# is not built on it (Debian's, GNU's own code) and reads 5 to 10 times
# slower than OpenSSL's SHA-NI code (a 100 MB file: 2.4 s against 0.3 s
# here), while ``openssl`` takes some ms more to start (3.5 against 0.5):
# about even at 2 MB. ``-r``: sha256sum's output ("HEX *stdin").
BIG = 4 << 20
_BIG_PRELUDE = ('_tfm_f=sha256sum; openssl dgst -sha256 -r </dev/null >/dev/null 2>&1 && '
                '_tfm_f="openssl dgst -sha256 -r"; ')
# A big tar is extracted in records of 128 KB where tar takes ``-b`` (GNU
# tar, bsdtar; busybox' has no ``-b``): GNU tar's default record, 10 KB,
# makes a read and a write for every 10 KB of the archive, and extracting a
# 100 MB bundle took 0.11 s of system time against 0.05 s in 128-KB records
# (each task extracts its own copy: eight tasks on an agent, eight times).
# Whether ``-b`` is taken is tried once, writing an empty archive nowhere.
TAR_BLOCKING = 256   # 512-byte blocks a record
_BIG_TAR_PRELUDE = ('_tfm_b=; tar -b %d -cf /dev/null -T /dev/null >/dev/null 2>&1 && '
                    '_tfm_b="-b %d"; ' % (TAR_BLOCKING, TAR_BLOCKING))


def check_command(files: Iterable[Fetched]) -> str:
    """The shell text that goes before a task's command: checks each of
    ``files`` (module docstring), then extracts those to unpack; "" for
    no files. It sets ``$_tfm_d`` to the sandbox, as the command after it
    may name it (``SANDBOX``)."""
    files = list(files)
    if not files:
        return ""
    text = [_PRELUDE]
    if any(each.size >= BIG for each in files):
        text.append(_BIG_PRELUDE)
    if any(each.unpack and each.size >= BIG and _tar_flag(each.name) is not None
           for each in files):
        text.append(_BIG_TAR_PRELUDE)
    text.extend("_tfm_c %s %s%s; " % (shlex.quote(each.name), each.sha256,
                                      ' "$_tfm_f"' if each.size >= BIG else "")
                for each in files)
    for each in files:
        if each.unpack:
            text.append('%s || { echo "tfmesos: cannot extract "%s" into the sandbox" >&2; '
                        'exit 1; }; ' % (unpack_command(each.name, each.size >= BIG),
                                         shlex.quote(each.name)))
    return "".join(text)


def refusal(lines: Iterable[str]) -> Optional[str]:
    """The refusal line among ``lines`` (a task's last stderr lines), the
    last one when there are several, or None."""
    found = None
    for line in lines:
        if REFUSAL.search(line):
            found = line.strip()
    return found


__all__ = ["REFUSED", "REFUSAL", "BIG", "Fetched", "check_command", "unpack_command", "refusal"]
