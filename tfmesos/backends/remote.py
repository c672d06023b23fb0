"""A run on a remote Mesos master (``-m HOST:PORT``, a list, ``zk://``)."""

from ..mesos.master_address import parse_master
from .advertise import advertise_address, checked, given_address


class RemoteMaster:
    """``master`` as given; tasks reach the run at ``advertise`` (else the
    address of the route towards the master, ``advertise.advertise_address``)."""

    credentials = None      # MESOS_PRINCIPAL / MESOS_SECRET, read by the driver

    def __init__(self, master, advertise=None, environ=None):
        self.master = master
        self._explicit = advertise
        self._environ = {} if environ is None else environ
        self._advertised = None

    def start(self):
        """Checks the address tasks reach the run at before the master is
        contacted (``advertise.checked``); through zk:// whether the master
        is on this host is known once the leader is, when the first task is
        made."""
        if self.master.lower().startswith("zk://"):
            given, source = given_address(self._explicit, self._environ)
            if given is not None:
                checked(given, source)
        else:
            self.advertised_address(parse_master(self.master).urls[0])
        return self.master

    def bind_host(self):
        return None

    def advertised_address(self, master_url):
        if self._advertised is None:
            self._advertised = advertise_address(self._explicit, master_url, self._environ)
        return self._advertised

    def describe(self):
        return self.master

    def stop(self):
        pass


__all__ = ["RemoteMaster"]
