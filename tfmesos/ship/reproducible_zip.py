"""Zips whose bytes are their members' alone (fixed dates and modes), so
that the same members give the same sha256: the name they are served
under."""

import hashlib
import io
import os
import stat
import zipfile


def write_zip(members, out_dir, prefix):
    """``members`` ((name, bytes), ...) as a reproducible zip (fixed dates and
    modes) named ``PREFIX-<sha256[:16]>.zip`` in ``out_dir``: (path, name,
    sha256, size)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members:
            entry = zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = (stat.S_IFREG | 0o644) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    data = buffer.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    name = "%s-%s.zip" % (prefix, sha[:16])
    path = os.path.join(out_dir, name)
    with open(path, "wb") as handle:
        handle.write(data)
    return path, name, sha, len(data)


__all__ = ["write_zip"]
