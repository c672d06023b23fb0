"""Files that look like credentials. ``tfrun --ship`` refuses to pack them
(every task of the run downloads the bundle, on agents that other users'
tasks share) unless they are left out (``--ship-exclude``, ``.gitignore``)
or allowed (``--ship-allow-secrets``). The rules are names, kept few and
specific (README, "Ship your code"); they are matched case-sensitively, as
the tools that write these files name them."""

import fnmatch

# A file whose name matches: dotenv files, SSH private keys, keys and
# certificate stores, credentials files of git, pip, netrc and PostgreSQL.
NAMES = (".env", ".env.*", ".envrc", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
         "*.pem", "*.key", "*.p12", "*.pfx", ".netrc", ".git-credentials", ".pypirc",
         ".pgpass")
# Anything under a directory of this name: SSH, AWS and GnuPG configuration.
DIRECTORIES = (".ssh", ".aws", ".gnupg")
# A path that ends so: Docker's and kubectl's credentials.
PATHS = (".docker/config.json", ".kube/config")
# Names the rules above match that hold no secret: public keys, templates.
NOT_SECRETS = ("*.pub", ".env.example", ".env.sample", ".env.template")


def likely_secret(path):
    """What of ``path`` (relative, ``/``-separated) looks like a secret: the
    directory (with a trailing ``/``) under which it is, or the path
    itself; None when nothing does."""
    parts = path.split("/")
    for index, part in enumerate(parts[:-1]):
        if part in DIRECTORIES:
            return "/".join(parts[:index + 1]) + "/"
    name = parts[-1]
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in NOT_SECRETS):
        return None
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in NAMES) \
            or any(path == end or path.endswith("/" + end) for end in PATHS):
        return path
    return None


__all__ = ["likely_secret", "NAMES", "DIRECTORIES", "PATHS", "NOT_SECRETS"]
