"""``tfrun --ship``: the user's directory and tfmesos' task side, packed and
served over HTTP to tasks on agents that share no files with the submitter.

* ``contents``: what is packed from a directory (git's view, excludes, run
  directories left out; links out of it and likely secrets refused,
  ``likely_secrets``), decided before anything is packed;
* ``bundle``: ``ShipSpec``; packing a directory (size limit) into a
  content-addressed ``.tar``, and the task side into a zip;
* ``bundle_server``: ``BundleServer``, the shipped files at a per-run secret
  path (GET/HEAD, bounded, idle timeouts);
* ``shipping``: ``Shipment``, packs and serves what one run ships; the
  TaskInfo's ``uris``, environment and command; ``Shipment.from_packed``
  serves what another Shipment packed (``packed_files``), unchanged;
* ``fetch_check``: the check written into a task's command, the sha256 of
  every file it fetched compared before anything of it runs;
* ``scheduler_side``: ``tfrun --detach``'s scheduler (tfmesos, mesos_local,
  addict, kazoo) as one reproducible zip, and its task's command;
* ``function_payload``: ``tfmesos.run``'s function and arguments,
  cloudpickled into a zip (one of ``ShipSpec.extra_files``).
"""
