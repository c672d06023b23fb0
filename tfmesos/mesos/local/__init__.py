"""The embedded single-machine master (``--master local``)."""
