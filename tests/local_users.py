"""The second local user the tests act as, or give files to: ``nobody``."""

import os
import pwd

import pytest


def nobody(needs_root=None):
    """``nobody``'s password entry; the test is skipped where there is no
    such user, or, when ``needs_root`` says why root is needed, without root."""
    if needs_root and os.geteuid() != 0:
        pytest.skip(needs_root)
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' here")
