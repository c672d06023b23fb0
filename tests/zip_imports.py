"""What a Python imports from a zip of modules (``ship/compiled_zip.py``):
which modules came from it, which of its sources were compiled, which read."""

import importlib.util
import json
import subprocess

# Imports the modules named after the zip's root, then says which of them
# were imported from the zip, which of its sources were compiled and which
# read (zipimport reads a source beside a checked .pyc to compare hashes).
PROBE = """
import builtins, importlib, json, sys, zipimport
root, real, compiled, read = sys.argv[1], builtins.compile, [], []
def counting(source, filename, *args, **kwargs):
    if str(filename).startswith(root):
        compiled.append(filename)
    return real(source, filename, *args, **kwargs)
builtins.compile = counting
real_source = zipimport._get_pyc_source
def reading(importer, path):
    read.append(path)
    return real_source(importer, path)
zipimport._get_pyc_source = reading
for name in sys.argv[2:]:
    importlib.import_module(name)
loaded = [name for name, module in list(sys.modules.items())
          if (getattr(module, "__file__", None) or "").startswith(root)]
print(json.dumps({"loaded": loaded, "compiled": compiled, "read": read}))
"""


def zip_imports(python, root, modules, cwd, env):
    """``{"loaded", "compiled", "read"}`` of ``python -S`` importing
    ``modules`` with ``root`` (a zip, or a directory in it) first on its
    ``PYTHONPATH``; ``env`` is its environment otherwise."""
    result = subprocess.run([python, "-S", "-c", PROBE, root, *modules], capture_output=True,
                            text=True, cwd=cwd, timeout=120, env=dict(env, PYTHONPATH=root))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def imports_our_bytecode(python):
    """Whether ``python`` reads the bytecode this Python writes (the same
    magic number): else it compiles the sources beside it."""
    magic = subprocess.run([python, "-S", "-c", "import importlib.util as u; "
                            "print(u.MAGIC_NUMBER.hex())"], capture_output=True, text=True,
                           timeout=60).stdout.strip()
    return magic == importlib.util.MAGIC_NUMBER.hex()
