"""Settings that would do nothing for a run, refused before anything starts
by tfrun (``tfrun_options.read_options``) and the APIs
(``cluster_arguments.check_local``) alike, each error naming the fields to change
in its caller's words (``error_fields``: ``-C DOCKER``, ``containerizer_type=
DOCKER``): taken, they were silently ignored."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

from ..exceptions import SpecError

if TYPE_CHECKING:
    from .spec import RunSpec


def _named(fields: Sequence[str]) -> str:
    return " and ".join(fields)


def check_image_settings(image: Optional[str], containerizer: str, force_pull: bool,
                         volumes: Sequence[object]) -> None:
    """SpecError for the settings of image tasks given to a run without an
    image: its plain tasks have no container (``taskinfo.container_info``),
    so the Docker containerizer, the force pull and the volumes did nothing."""
    if image:
        return
    given = [field for field, on in (("{containerizer=DOCKER}", containerizer == "DOCKER"),
                                     ("{force_pull=True}", force_pull),
                                     ("{volumes}", volumes)) if on]
    if given:
        raise SpecError.about("%s %s for image tasks, and the run has no image: add "
                              "{image=IMAGE} (or set $DOCKER_IMAGE), or drop %s"
                              % (_named(given), "is" if len(given) == 1 else "are",
                                 _named(given)))


def check_master_scheme(master_scheme: str, master: str) -> None:
    """SpecError for the https scheme with a master that is no zk:// one:
    only the masters found in ZooKeeper take it (their MasterInfo has no
    scheme, ``master_info.master_url_from_info``); any other was reached as
    given (host:port over http) all the same. One given as https:// speaks
    it already: redundant, not refused."""
    if master_scheme == "https" and not speaks_https(master, master_scheme):
        raise SpecError.about("{master_scheme=https} is for masters found through zk://, and "
                              "the master (%s) is none: give an https master as "
                              "https://HOST:PORT, or drop {master_scheme}", master)


def speaks_https(master: str, master_scheme: str) -> bool:
    """Whether the run may reach an https master: one given as https://
    (alone or in a list), or found through zk:// with the https scheme; the
    embedded master and host:port speak http, and the agents' sandboxes are
    read over the master's scheme (``agent_files``)."""
    if master.lower().startswith("zk://"):
        return master_scheme == "https"
    return any(url.strip().lower().startswith("https://") for url in master.split(","))


def check_tls_settings(master: str, master_scheme: str, verify: bool,
                       ca_bundle: Optional[str]) -> None:
    """SpecError for a CA bundle, or verification turned off, with a master
    reached over http: the driver makes its TLS context for https masters
    only (``driver.MesosSchedulerDriver``, ``http_transport.TLSContext``),
    so they did nothing."""
    given = [field for field, on in (("{ca_bundle}", ca_bundle), ("{verify=False}", not verify))
             if on]
    if not given or speaks_https(master, master_scheme):
        return
    named, verb = _named(given), "is" if len(given) == 1 else "are"
    if master.lower().startswith("zk://"):
        raise SpecError.about("%s %s for https masters, and the masters found through zk:// are "
                              "reached over http: add {master_scheme=https}, or drop %s"
                              % (named, verb, named))
    raise SpecError.about("%s %s for https masters, and the master (%%s) is reached over http: "
                          "give the master as https://HOST:PORT, or drop %s"
                          % (named, verb, named), master)


def check(spec: "RunSpec") -> None:
    """Every check of this module on ``spec``'s settings."""
    check_image_settings(spec.image, spec.containerizer, spec.force_pull, spec.volumes)
    check_master_scheme(spec.master_scheme, spec.master)
    check_tls_settings(spec.master, spec.master_scheme, spec.verify, spec.ca_bundle)


__all__ = ["check", "check_image_settings", "check_master_scheme", "check_tls_settings",
           "speaks_https"]
