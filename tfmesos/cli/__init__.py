"""Command-line entry points: ``tfrun`` and ``tfmesos``."""
