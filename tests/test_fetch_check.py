"""The check a task's command makes of what the task fetched
(``ship/fetch_check.py``), as text: each digest written after its file's
name, names quoted for the shell, archives extracted only after every
file checked; and how tfrun reads a refusal back (``core.task_ends``).
Running it in a shell: tests/test_ship.py."""

import shlex

import pytest

from tfmesos.core.task_ends import refused_fetch
from tfmesos.ship.fetch_check import (
    BIG,
    REFUSED,
    TAR_BLOCKING,
    Fetched,
    check_command,
    refusal,
    unpack_command,
)

SHA = "0123456789abcdef" * 4
OTHER = "f" * 64


def test_each_digest_follows_its_file_s_name_and_extraction_comes_after_every_check():
    text = check_command([Fetched("tfmesos-bundle-0123456789abcdef.tar.gz", SHA, unpack=True),
                          Fetched("tfmesos-task-fedcba9876543210.zip", OTHER)])
    checks = ["_tfm_c tfmesos-bundle-0123456789abcdef.tar.gz %s; " % SHA,
              "_tfm_c tfmesos-task-fedcba9876543210.zip %s; " % OTHER]
    extract = 'tar -xzof "$_tfm_d"/tfmesos-bundle-0123456789abcdef.tar.gz -C "$_tfm_d"'
    positions = [text.index(part) for part in checks + [extract]]
    assert positions == sorted(positions)
    assert text.count("_tfm_c ") == 2 and text.count("tar ") == 1
    assert "exit %d" % REFUSED in text and text.endswith("; ")
    assert check_command([]) == ""


def test_a_big_file_is_hashed_by_openssl_where_it_works():
    small = check_command([Fetched("a.zip", SHA, size=BIG - 1)])
    assert "openssl" not in small and "_tfm_c a.zip %s; " % SHA in small
    text = check_command([Fetched("a.zip", SHA, size=100), Fetched("env.tgz", OTHER, True, BIG)])
    assert text.count("openssl dgst -sha256 -r") == 2      # tried once, then used
    assert '_tfm_c a.zip %s; _tfm_c env.tgz %s "$_tfm_f"; ' % (SHA, OTHER) in text


def test_names_are_quoted_for_the_shell():
    name = "it's $(reboot) `id` \"env\".tar.gz"
    text = check_command([Fetched(name, SHA, unpack=True)])
    assert "_tfm_c %s %s; " % (shlex.quote(name), SHA) in text
    # Split as the shell would: the name is one word wherever it is written.
    words = shlex.split(text.split("_tfm_c %s" % shlex.quote(name), 1)[1])
    assert words[0] == SHA + ";"
    assert "$(reboot)" not in text.replace(shlex.quote(name), "")


def test_a_big_tar_is_extracted_in_big_records_where_tar_takes_them():
    small = check_command([Fetched("b.tar", SHA, True, BIG - 1)])
    assert "$_tfm_b" not in small and 'tar -xof "$_tfm_d"/b.tar' in small
    text = check_command([Fetched("b.tar", SHA, True, BIG), Fetched("e.zip", OTHER, True, BIG)])
    assert text.count("tar -b %d -cf /dev/null" % TAR_BLOCKING) == 1   # tried once, then used
    assert 'tar $_tfm_b -xof "$_tfm_d"/b.tar -C "$_tfm_d"' in text
    assert 'unzip -qo "$_tfm_d"/e.zip' in text
    # Only an archive it extracts needs it.
    assert "$_tfm_b" not in check_command([Fetched("b.tar", SHA, False, BIG)])
    assert unpack_command("b.tar.gz", big=True) == 'tar $_tfm_b -xzof "$_tfm_d"/b.tar.gz -C "$_tfm_d"'


@pytest.mark.parametrize("name, command", [
    ("b.tar.gz", 'tar -xzof "$_tfm_d"/b.tar.gz -C "$_tfm_d"'),
    ("b.TGZ", 'tar -xzof "$_tfm_d"/b.TGZ -C "$_tfm_d"'),
    ("e.tar.bz2", 'tar -xjof "$_tfm_d"/e.tar.bz2 -C "$_tfm_d"'),
    ("e.txz", 'tar -xJof "$_tfm_d"/e.txz -C "$_tfm_d"'),
    ("e.tar", 'tar -xof "$_tfm_d"/e.tar -C "$_tfm_d"'),
    ("e.zip", 'unzip -qo "$_tfm_d"/e.zip -d "$_tfm_d"'),
    ("payload.pkl", None),
])
def test_archives_are_extracted_as_the_fetcher_would(name, command):
    assert unpack_command(name) == command


@pytest.mark.parametrize("name, sha, unpack", [
    ("", SHA, False), ("a/b.zip", SHA, False), ("..", SHA, False),
    ("a.zip", SHA[:63], False), ("a.zip", SHA.upper(), False), ("a.pkl", SHA, True)])
def test_what_cannot_be_checked_is_refused_when_the_command_is_made(name, sha, unpack):
    with pytest.raises(ValueError, match="Fetched: "):
        Fetched(name, sha, unpack)


def test_tfrun_reads_the_refusal_back_from_the_sandbox_s_stderr():
    line = "tfmesos: a b.tar.gz sha256 %s != expected %s: refusing to run it" % (OTHER, SHA)
    assert refusal(["sh: 1: something", line + "\n"]) == line
    assert refused_fetch(REFUSED, ["before", line]) == line
    assert refused_fetch(1, [line]) is None            # not the check's exit status
    assert refused_fetch(REFUSED, ["exited 65 by itself"]) is None
    assert refused_fetch(None, []) is None
