"""A run on a remote Mesos master (``-m HOST:PORT``, a list, ``zk://``)."""

from ..mesos.master_address import parse_master
from .advertise import advertise_address, bind_address, checked, given_address


def credentials_of(environ):
    """(principal, secret) of ``MESOS_PRINCIPAL`` / ``MESOS_SECRET`` in
    ``environ`` (as a pymesos-style driver reads them), None when either is
    unset."""
    principal, secret = environ.get("MESOS_PRINCIPAL"), environ.get("MESOS_SECRET")
    return (principal, secret) if principal and secret is not None else None


class RemoteMaster:
    """``master`` as given; tasks reach the run at ``advertise`` (else the
    address of the route towards the master, ``advertise.advertise_address``),
    where the run's listeners bind too."""

    def __init__(self, master, advertise=None, environ=None):
        self.master = master
        self._explicit = advertise
        self._environ = {} if environ is None else environ
        self._advertised = None
        self.credentials = credentials_of(self._environ)

    @property
    def principal(self):
        """The principal the run authenticates as (None: none)."""
        return self.credentials[0] if self.credentials else None

    def start(self):
        self.check()
        return self.master

    def check(self):
        """Checks the address tasks reach the run at before the master is
        contacted (``advertise.checked``; TFMesosError); through zk://
        whether the master is on this host is known once the leader is,
        when the first task is made."""
        if self._zookeeper():
            given, source = given_address(self._explicit, self._environ)
            if given is not None:
                checked(given, source)
        else:
            self.advertised_address(parse_master(self.master).urls[0])

    def _zookeeper(self):
        return self.master.lower().startswith("zk://")

    def bind_host(self):
        """The advertised address (``advertise.bind_address``): given, or
        the route's towards the master. Through zk:// without a given
        address the leader, and so the route, is not known when the
        listeners start: None, every address."""
        if self._zookeeper():
            given, _ = given_address(self._explicit, self._environ)
            return None if given is None else bind_address(given)
        return bind_address(self.advertised_address(parse_master(self.master).urls[0]))

    def advertised_address(self, master_url):
        if self._advertised is None:
            self._advertised = advertise_address(self._explicit, master_url, self._environ)
        return self._advertised

    def describe(self):
        return self.master

    def stop(self):
        pass


__all__ = ["RemoteMaster", "credentials_of"]
