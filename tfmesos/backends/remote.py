"""A run on a remote Mesos master (``-m HOST:PORT``, a list, ``zk://``)."""

from collections.abc import Mapping
from typing import Optional

from ..exceptions import TFMesosError
from ..mesos.master_address import MasterSpec, parse_master
from .advertise import (
    advertise_address,
    bind_address,
    checked,
    given_address,
    is_loopback,
    on_this_host,
    resolves,
)


def credentials_of(environ: Mapping[str, str]) -> Optional[tuple[str, str]]:
    """(principal, secret) of ``MESOS_PRINCIPAL`` / ``MESOS_SECRET`` in
    ``environ`` (as a pymesos-style driver reads them), None when either is
    unset."""
    principal, secret = environ.get("MESOS_PRINCIPAL"), environ.get("MESOS_SECRET")
    return (principal, secret) if principal and secret is not None else None


def credentials_environ(credentials: Optional[tuple[str, str]]) -> dict[str, str]:
    """``MESOS_PRINCIPAL`` / ``MESOS_SECRET`` of ``credentials`` (``credentials_of``'s
    inverse; none: {})."""
    if credentials is None:
        return {}
    return {"MESOS_PRINCIPAL": credentials[0], "MESOS_SECRET": credentials[1]}


class RemoteMaster:
    """``master`` as given; tasks reach the run at ``advertise`` (else the
    address of the route towards the master, ``advertise.advertise_address``),
    where the run's listeners bind too."""

    def __init__(self, master: str, advertise: Optional[str] = None,
                 environ: Optional[Mapping[str, str]] = None) -> None:
        self.master = master
        self._explicit = advertise
        self._environ: Mapping[str, str] = {} if environ is None else environ
        self._advertised: dict[str, str] = {}   # of each master URL it was asked for
        self._loopback_checked: dict[str, bool] = {}   # whether an advertised address is
        self._agents_here: dict[str, bool] = {}        # whether an agent's host is this one
        self.credentials = credentials_of(self._environ)

    @property
    def principal(self) -> Optional[str]:
        """The principal the run authenticates as (None: none)."""
        return self.credentials[0] if self.credentials else None

    def start(self) -> str:
        self.check()
        return self.master

    def check(self) -> None:
        """Checks the address tasks reach the run at before the master is
        contacted (``advertise.checked``; TFMesosError); through zk://
        whether the master is on this host is known once the leader is,
        when the first task is made."""
        if self._leader_unknown(self.master):
            found = given_address(self._explicit, self._environ)
            if found[0] is not None:
                checked(*found)
        else:
            self.advertised_address(self.master)

    @staticmethod
    def _leader_unknown(master: str) -> bool:
        """Whether ``master`` is zk:// or a list of masters: which one
        leads, and so the route towards it, is known once subscribed."""
        spec = parse_master(master)
        return spec.kind == "zk" or len(spec.urls) > 1

    def bind_host(self) -> Optional[str]:
        """The advertised address (``advertise.bind_address``): given, or
        the route's towards the master. Through zk:// or a list of masters
        without a given address the leader, and so the route, is not known
        when the listeners start: None, every address."""
        if self._leader_unknown(self.master):
            given, _ = given_address(self._explicit, self._environ)
            return None if given is None else bind_address(given)
        return bind_address(self.advertised_address(self.master))

    def advertised_address(self, master_url: str) -> str:
        """The address tasks reach the run at, towards ``master_url``, kept
        for each master it names. Through zk:// or a list of masters before
        the leader is known (``master_url`` the master as given, when the
        framework subscribes): the given address, else the route's towards
        the first ZooKeeper server or master that resolves, not kept: the
        tasks, made once subscribed, are given the route's towards the
        leader, which the framework's label then names too
        (``FrameworkNotice``); a first master that is down (a list is given
        for that) or a ZooKeeper server whose name no longer resolves (an
        ensemble runs without it) did not stop the run."""
        if self._leader_unknown(master_url):
            given = given_address(self._explicit, self._environ)
            if given[0] is not None:
                return checked(*given)
            return self._provisional(parse_master(master_url))
        url = parse_master(master_url).urls[0]
        if url not in self._advertised:
            self._advertised[url] = advertise_address(self._explicit, url, self._environ)
        return self._advertised[url]

    def _provisional(self, spec: MasterSpec) -> str:
        """The route's towards the first ZooKeeper server or master of
        ``spec`` that resolves and has a route (the last one's error when
        none does)."""
        if spec.kind == "zk":
            urls = ["http://" + host for host in spec.hosts.split(",")]
            what = "the ZooKeeper server"
        else:
            urls, what = list(spec.urls), "the Mesos master"
        for index, url in enumerate(urls):
            try:
                return advertise_address(None, url, self._environ, what)
            except TFMesosError:
                if index == len(urls) - 1:
                    raise
        raise AssertionError("a master spec names at least one host")

    def unreachable_from(self, hostname: str, advertised: str) -> Optional[TFMesosError]:
        """Why tasks on the agent at ``hostname`` cannot reach the run at
        ``advertised``: a loopback address (the route towards a master on
        this host, ``-m localhost:5050``), an agent on another host (none
        there reaches this one's loopback); else None, also for an agent
        whose name does not resolve here (it cannot be told), and for an
        address given (``--advertise-address 127.0.0.1``: the user says the
        agents are on this host, whatever their names: an agent's
        --hostname may name a NAT's public address). Each host name is
        looked up once."""
        if given_address(self._explicit, self._environ)[0] is not None:
            return None
        if advertised.strip("[]") not in self._loopback_checked:
            self._loopback_checked[advertised.strip("[]")] = is_loopback(advertised)
        if not self._loopback_checked[advertised.strip("[]")]:
            return None
        if hostname not in self._agents_here:
            self._agents_here[hostname] = on_this_host(hostname) or not resolves(hostname)
        if self._agents_here[hostname]:
            return None
        return TFMesosError.about(
            "tasks on the agent at %s, another host, cannot reach tfmesos at %s, a loopback "
            "address (the route towards the Mesos master on this host): pass "
            "{advertise_address} (or set TFMESOS_ADVERTISE_ADDRESS) with an address of this host "
            "that the agents can reach (%s if they run on this host)", hostname, advertised,
            advertised)

    def describe(self) -> str:
        """The master as given, its ZooKeeper password masked (the status line shows it)."""
        from ..mesos.master_address import without_password
        return without_password(self.master)

    def stop(self) -> None:
        pass


__all__ = ["RemoteMaster", "credentials_of"]
