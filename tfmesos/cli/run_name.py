"""A run's default name (``tfrun --name``): the script its command runs
(``train.py`` for ``python train.py ...``), so that ``tfmesos runs``, the
run directories and the Mesos framework tell runs apart."""

import os
import re
import shlex

FALLBACK = "tfrun"
# Words before the program: VAR=value, and commands that run the rest.
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = {"env", "exec", "nohup", "time", "nice"}
# Interpreters whose first word that is not an option is the script.
_PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?\Z")
_SHELL = re.compile(r"^(ba|da|k|z)?sh\Z")
_PYTHON_VALUES = ("-W", "-X", "-Q")   # python options whose value is the next word


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")   # as core.inputs: no name may hold them


def default_name(command):
    """The name for ``command`` (its words after ``--``; one word is a shell
    line): the script an interpreter runs, a ``-m`` module, else the
    program's own name; a control character in it (a script named with a
    tab) made ``_``, since no run's name may hold one."""
    return _CONTROL.sub("_", _named(command))


def _named(command):
    words = list(command)
    if len(words) == 1:
        try:
            words = shlex.split(words[0])
        except ValueError:   # unbalanced quotes: the shell will say so
            words = words[0].split()
    while words and (_ASSIGNMENT.match(words[0]) or words[0] in _WRAPPERS):
        words.pop(0)
    if not words:
        return FALLBACK
    program = os.path.basename(words[0]) or FALLBACK
    python = bool(_PYTHON.match(program))
    if not (python or _SHELL.match(program)):
        return program
    rest = iter(words[1:])
    for word in rest:
        if word.startswith("-c"):
            return program       # inline code: no script to name it after
        if python and word.startswith("-m"):
            return word[2:] or next(rest, program)
        if python and word in _PYTHON_VALUES:
            next(rest, None)
        elif not word.startswith("-"):
            return os.path.basename(word) or program
        elif word == "-":
            return program       # the script comes on stdin
    return program
