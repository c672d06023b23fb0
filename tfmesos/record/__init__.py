"""What a run leaves behind and how it is read: the run directory
(``run_record``: a log per task and attempt, ``run.json``) and its readers.

* ``schema``: run.json's classes (``RunFile``, ``Task``, ``Attempt``, ...),
  their dict forms, reading older versions, its JSON Schema (pure);
* ``run_record``: ``RunRecord``, the run directory as the run goes; every
  attempt's end at the finish;
* ``task_logs``: the run directory's log file per task, attempt and stream;
* ``outcomes``: how a run and its attempts end (status, tfrun's exit code,
  whether an attempt failed);
* ``history``: reading run directories back: listing, finding a run, pruning;
* ``report``: ``report.html``, the timeline, outcome, hints, usage charts (pure);
* ``usage_table``: what each task asked for against what it used, tfrun's
  table and sizing hints (pure);
* ``hints``: one line of advice from a failed task's last lines, exit code
  and Mesos' message (pure);
* ``mlflow_mapping``: ``MlflowSpec`` and run.json as MLflow's parameters,
  metrics, tags and status, and how a gone tfrun's MLflow run ends (pure);
  ``mlflow_logger``: one MLflow run per run (``tfrun --mlflow``), its
  metrics streamed, MLflow imported in a thread of its own.

Nothing here imports the run core: the core writes the record.
"""
