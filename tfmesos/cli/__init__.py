"""The command line: ``tfrun`` (``tfrun``), ``tfmesos`` (``main``: ``runs``,
``show``, ``logs``, ``report`` in ``runs``; ``local-master``; ``docker`` in
``docker_wrapper``), the status line while a run forms (``progress``) and
``tfrun --tensorboard`` (``tensorboard``), a run's default name
(``run_name``). A thin boundary: one-line errors, exit codes, no
abbreviated options (``common``)."""
