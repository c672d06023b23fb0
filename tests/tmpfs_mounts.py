"""A small tmpfs for a test: a full disk, or one out of inodes."""

import contextlib
import subprocess

import pytest


@contextlib.contextmanager
def mounted_tmpfs(place, options):
    """A tmpfs mounted at ``place`` (made here) with mount ``options``
    (``size=64k,...``), unmounted after; the test is skipped where none can
    be mounted (root only)."""
    place.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(place)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % mounted.stderr.strip())
    try:
        yield place
    finally:
        subprocess.run(["umount", "-l", str(place)], check=True)
