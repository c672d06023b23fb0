"""Public names of a package imported on first use (PEP 562): a module that
needs one submodule of the package does not pay for the others."""

import importlib


def lazy_exports(package, namespace, exports, submodules=()):
    """``(__getattr__, __dir__)`` for ``package`` (its ``__name__``) whose
    ``exports`` map each public name to the submodule (relative, ``.x``, or
    absolute) that defines it, and whose ``submodules`` (names) are
    imported as ``package.name`` on first use; a name is kept in
    ``namespace`` (the package's ``globals()``) once imported."""

    def __getattr__(name):
        if name in submodules:
            value = importlib.import_module("." + name, package)
            namespace[name] = value
            return value
        module = exports.get(name)
        if module is None:
            raise AttributeError("module %r has no attribute %r" % (package, name))
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(exports) | set(submodules))

    return __getattr__, __dir__
