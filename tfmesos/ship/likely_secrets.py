"""Files that look like credentials. ``tfrun --ship`` refuses to pack them
(every task of the run downloads the bundle, on agents that other users'
tasks share) unless they are left out (``--ship-exclude``, ``.gitignore``)
or allowed (``--ship-allow-secrets``). The rules are names, kept few and
specific (README, "Ship your code"); they are matched case-sensitively, as
the tools that write these files name them."""

import fnmatch
import re

# A file whose name matches: dotenv files, SSH private keys, keys and
# certificate stores, credentials files of git, pip, npm, netrc and PostgreSQL.
NAMES = (".env", ".env.*", ".envrc", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
         "*.pem", "*.key", "*.p12", "*.pfx", ".netrc", ".git-credentials", ".pypirc",
         ".pgpass", ".npmrc")
# Anything under a directory of this name: SSH, AWS and GnuPG configuration.
DIRECTORIES = (".ssh", ".aws", ".gnupg")
# A path that ends so (each part a pattern): Docker's, kubectl's, gcloud's
# and GitHub CLI's credentials; the system's password hashes and SSH host
# keys (a link followed to /etc, or --ship /etc).
PATHS = (".docker/config.json", ".kube/config", ".config/gcloud/credentials.db",
         ".config/gcloud/access_tokens.db", ".config/gcloud/application_default_credentials.json",
         ".config/gh/hosts.yml", "etc/shadow", "etc/shadow-", "etc/gshadow", "etc/gshadow-",
         "etc/ssh/ssh_host_*_key")
# Names the rules above match that hold no secret: public keys, templates.
NOT_SECRETS = ("*.pub", ".env.example", ".env.sample", ".env.template")


def _any_of(patterns):
    """One compiled match of a name against any of ``patterns`` (fnmatch's,
    case-sensitive): a file's name is looked at twice (its path in the
    bundle and where it really is), and one pattern at a time made packing
    this checkout ~10 ms slower."""
    return re.compile("|".join(fnmatch.translate(pattern) for pattern in patterns)).match


_NAME = _any_of(NAMES)
_NOT_SECRET = _any_of(NOT_SECRETS)
_PATH_NAME = _any_of(end.rsplit("/", 1)[-1] for end in PATHS)   # a path's last part


def likely_secret(path):
    """What of ``path`` (relative, ``/``-separated) looks like a secret: the
    directory (with a trailing ``/``) under which it is, or the path
    itself; None when nothing does."""
    parts = path.split("/")
    for index, part in enumerate(parts[:-1]):
        if part in DIRECTORIES:
            return "/".join(parts[:index + 1]) + "/"
    name = parts[-1]
    if _NOT_SECRET(name):
        return None
    if _NAME(name) or (_PATH_NAME(name) and any(_ends(parts, end.split("/")) for end in PATHS)):
        return path
    return None


def _ends(parts, ending):
    return len(parts) >= len(ending) and all(
        fnmatch.fnmatchcase(part, pattern) for part, pattern in zip(parts[-len(ending):], ending))


__all__ = ["likely_secret", "NAMES", "DIRECTORIES", "PATHS", "NOT_SECRETS"]
