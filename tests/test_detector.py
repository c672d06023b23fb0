"""Unit tests of master strings, MasterInfo decoding, the leader choice and the
detectors (tfmesos.mesos.detector, detection, master_address, master_info, zookeeper):
no network, no ZooKeeper."""

import json
import subprocess
import sys
import threading

import pytest
from fixtures_zk import MASTER_INFO_JSON, master_info

from tfmesos.exceptions import MasterAddressError, MesosConnectionError, TFMesosError
from tfmesos.mesos.detection import make_detector
from tfmesos.mesos.detector import StaticDetector
from tfmesos.mesos.master_address import MasterSpec, parse_master, with_password, without_password
from tfmesos.mesos.master_info import master_url_from_info
from tfmesos.mesos.zk_leader import Leadership, choose_leader
from tfmesos.mesos.zookeeper import ZKDetector

ACCEPTED_FORMS = (
    "expected host:port, http(s)://host:port, a comma-separated list of those, "
    "zk://host:port[,host:port]/path, or 'local'"
)


@pytest.mark.parametrize(
    "text, urls",
    [
        ("10.0.0.1:5050", ("http://10.0.0.1:5050",)),
        ("master.example.com:5051", ("http://master.example.com:5051",)),
        ("localhost", ("http://localhost:5050",)),
        ("10.0.0.1", ("http://10.0.0.1:5050",)),
        ("http://10.0.0.1:5050", ("http://10.0.0.1:5050",)),
        ("http://m:5050/", ("http://m:5050",)),
        ("HTTP://m:5050", ("http://m:5050",)),
        ("https://m:5050", ("https://m:5050",)),
        ("https://m", ("https://m:5050",)),
        ("[::1]:5050", ("http://[::1]:5050",)),
        ("[::1]", ("http://[::1]:5050",)),
        ("https://[fe80::1]:8443", ("https://[fe80::1]:8443",)),
        ("h1:5050,h2:5050", ("http://h1:5050", "http://h2:5050")),
        ("h1:5050,https://h2:5051,[::1]", ("http://h1:5050", "https://h2:5051", "http://[::1]:5050")),
        ("h1:5050,h1:5050,h2", ("http://h1:5050", "http://h2:5050")),
        ("my_master-1.internal:5050", ("http://my_master-1.internal:5050",)),
        # An absolute name (no search domain), as --advertise-address takes it.
        ("master.example.com.:5050", ("http://master.example.com.:5050",)),
        ("  m:5050\n", ("http://m:5050",)),
        ("local:5050", ("http://local:5050",)),
        # A master's UPID, as Mesos' detector reads it (src/master/detector/detector.cpp).
        ("master@10.0.0.1:5050", ("http://10.0.0.1:5050",)),
        ("master@m", ("http://m:5050",)),
    ],
)
def test_parse_http_forms(text, urls):
    spec = parse_master(text)
    assert spec.kind == "http"
    assert spec.urls == urls
    assert all(not url.endswith("/") for url in spec.urls)
    assert str(spec) == ",".join(urls)
    assert parse_master(str(spec)) == spec


@pytest.mark.parametrize(
    "text, hosts, path, auth",
    [
        ("zk://h1:2181/mesos", "h1:2181", "/mesos", None),
        ("zk://h1:2181,h2:2181/mesos", "h1:2181,h2:2181", "/mesos", None),
        ("zk://h1,h2:2182/mesos", "h1:2181,h2:2182", "/mesos", None),
        ("ZK://10.0.0.1:2181/mesos/prod", "10.0.0.1:2181", "/mesos/prod", None),
        ("zk://[::1]:2181/mesos", "[::1]:2181", "/mesos", None),
        ("zk://user:pass@h1:2181,h2:2181/mesos", "h1:2181,h2:2181", "/mesos", ("digest", "user:pass")),
        ("zk://user:p:a@ss@h1:2181/mesos", "h1:2181", "/mesos", ("digest", "user:p:a@ss")),
        # One trailing '/' is no part of the znode (src/zookeeper/group.cpp strips it).
        ("zk://h1:2181/mesos/", "h1:2181", "/mesos", None),
    ],
)
def test_parse_zk_forms(text, hosts, path, auth):
    spec = parse_master(text)
    assert (spec.kind, spec.urls, spec.hosts, spec.path, spec.auth) == ("zk", (), hosts, path, auth)
    assert str(spec) == f"zk://{hosts}{path}" == spec.zk_url


@pytest.mark.parametrize("text", ["local", "LOCAL", " local "])
def test_parse_local(text):
    spec = parse_master(text)
    assert spec == MasterSpec(kind="local")
    assert str(spec) == "local"


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("foo:bar", "port 'bar'"),
        ("m:0", "port '0'"),
        ("m:65536", "port '65536'"),
        ("m:-1", "port '-1'"),
        ("m:", "port ''"),
        (":5050", "host is missing"),
        ("m:5050:1", "brackets"),
        ("::1:5050", "brackets"),
        ("[::1", "unclosed"),
        ("[nothex]:5050", "not an IPv6 address"),
        ("[::1]5050", "':port'"),
        ("10.0.0.300:5050", "IPv4"),
        ("-bad-.example:5050", "host name"),
        ("m..:5050", "host name"),
        (".:5050", "IPv4"),
        ("zk://", "path"),
        ("zk://h1:2181", "path"),
        ("zk://h1:2181/", "path"),
        ("zk:///mesos", "at least one host"),
        ("zk://h1:2181/mesos//", "znode path"),
        ("zk://h1:2181//mesos", "znode path"),
        ("zk://h1:2181/mesos/../x", "znode path"),
        ("zk://h1:x/mesos", "port 'x'"),
        ("zk://h1:2181,,h2:2181/mesos", "empty ZooKeeper host"),
        ("ftp://m:5050", "unknown scheme 'ftp://'"),
        ("file:///etc/mesos/master", "a file:// master (deprecated in Mesos) is not read: "
         "give the address the file holds"),
        ("slave@10.0.0.1:5050", "credentials"),
        ("http://master@10.0.0.1:5050", "credentials"),   # a URL's user, not a UPID
        ("h1:5050,zk://h2:2181/mesos", "only entry"),
        ("h1:5050 h2:5050", "whitespace"),
        ("h1:5050, h2:5050", "whitespace"),
        ("master one:5050", "whitespace"),
        ("h1:5050,,h2:5050", "empty entry"),
        ("h1:5050,", "empty entry"),
        ("http://", "host is missing"),
        ("http://m:5050/master", "no path"),
        ("m:5050/", "no path"),
        ("http://user:pw@m:5050", "credentials"),
        ("m:５０５０", "port"),
        ("localhost:5050\nlocal", "whitespace"),
    ],
)
def test_malformed_masters(text, reason):
    with pytest.raises(MasterAddressError) as info:
        parse_master(text)
    message = str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TFMesosError)
    assert "\n" not in message and "\r" not in message
    assert message.startswith(f"invalid Mesos master {text!r} (")
    assert reason in message
    assert message.endswith(ACCEPTED_FORMS)


@pytest.mark.parametrize(
    "text, shown, reason",
    [
        ("zk://alice:s3cret@h1:x/mesos", "zk://alice:***@h1:x/mesos", "port 'x'"),
        ("zk://s3cret@h1:2181/mesos", "zk://***@h1:2181/mesos", "must read user:password@"),
        ("zk://:s3cret@h1:2181/mesos", "zk://:***@h1:2181/mesos", "must read user:password@"),
        ("zk://alice:s3cret@/mesos", "zk://alice:***@/mesos", "at least one host"),
        # A password holding '/': its pieces were shown ("port 's3cr'"), and
        # the whole of it where the rest parsed.
        ("zk://alice:s3cr/et@h1:2181/mesos", "zk://***@h1:2181/mesos", "may not hold '/'"),
    ],
)
def test_malformed_zk_url_masks_password(text, shown, reason):
    with pytest.raises(MasterAddressError) as info:
        parse_master(text)
    message = str(info.value)
    assert "s3cret" not in message and "s3cr" not in message
    assert message.startswith(f"invalid Mesos master {shown!r} (")
    assert reason in message
    assert message.endswith(ACCEPTED_FORMS)


def test_a_masked_zookeeper_password_is_taken_from_the_same_master_given():
    # Records and files hold the master as without_password writes it; the
    # password comes back only from a master the user gave that names the
    # same ZooKeeper servers, path and user.
    full = "zk://alice:s3cret@h1:2181,h2:2181/mesos"
    recorded = without_password(full)
    assert recorded == "zk://alice:***@h1:2181,h2:2181/mesos"
    assert with_password(recorded, None, "", full) == full
    assert with_password(recorded, "zk://alice:s3cret@h1,h2/mesos") == \
        "zk://alice:s3cret@h1,h2/mesos"   # the same servers, default port
    for other in ("zk://bob:s3cret@h1:2181,h2:2181/mesos", "zk://alice:s3cret@h1:2181/mesos",
                  "zk://alice:s3cret@h1:2181,h2:2181/other", "h1:5050", recorded,
                  "zk://alice:s3cret@h1:2181,h2:2181/mes os"):
        with pytest.raises(MasterAddressError) as info:
            with_password(recorded, other)
        assert str(info.value) == (
            "the Mesos master %s: tfmesos keeps the ZooKeeper password in no file: give this "
            "master with it in $MESOS_MASTER (or --master)" % recorded)
    # A master with nothing masked is what it is.
    for text in (full, "h1:5050", "zk://h1:2181/mesos", "local", "not a master"):
        assert with_password(text) == text
    for text in ("h1:5050", "zk://h1:2181/mesos", "local"):
        assert without_password(text) == text


def test_a_zookeeper_path_may_hold_an_at_as_in_mesos():
    # Mesos takes the path from the first '/' (include/mesos/zookeeper/url.hpp):
    # 'zk://h:2181/mesos@x' is valid there; it was refused as a password with '/'.
    spec = parse_master("zk://h:2181/mesos@x")
    assert (spec.hosts, spec.path, spec.auth) == ("h:2181", "/mesos@x", None)
    assert without_password("zk://alice:pw@h:2181/mesos@x") == "zk://alice:***@h:2181/mesos@x"


def test_non_string_master():
    with pytest.raises(MasterAddressError, match=r"invalid Mesos master None \(not a string\)"):
        parse_master(None)


def test_spec_repr_hides_credentials():
    spec = parse_master("zk://alice:s3cret@h1:2181/mesos")
    assert "s3cret" not in repr(spec)
    assert "s3cret" not in str(spec)
    assert spec.auth == ("digest", "alice:s3cret")


def test_spec_validates_itself():
    with pytest.raises(MasterAddressError, match="unknown Mesos master kind 'yarn'"):
        MasterSpec(kind="yarn")
    with pytest.raises(MasterAddressError, match="at least one URL"):
        MasterSpec(kind="http")
    with pytest.raises(MasterAddressError, match="absolute path"):
        MasterSpec(kind="zk", hosts="h:2181", path="mesos")
    assert MasterSpec(kind="http", urls=["http://m:5050"]).urls == ("http://m:5050",)


# --------------------------------------------------------------------------
# MasterInfo JSON
# --------------------------------------------------------------------------


def test_master_info_sample_is_what_mesos_writes():
    info = json.loads(MASTER_INFO_JSON)
    assert list(info) == sorted(info)
    assert info["ip"] == 184549386
    # Over http its IP, as Mesos' scheduler library connects (a host name may
    # not resolve here: the run failed where Mesos' own clients connect);
    # over https the name its certificate holds.
    assert master_url_from_info(MASTER_INFO_JSON.encode()) == "http://10.0.0.11:5050"
    assert master_url_from_info(MASTER_INFO_JSON, scheme="https") == "https://mesos-master-1.example.com:5050"


def test_master_info_builder_matches_sample_shape():
    built = master_info("10.0.0.11", 5050, hostname="mesos-master-1.example.com")
    sample = json.loads(MASTER_INFO_JSON)
    assert set(built) == set(sample)
    assert {k: v for k, v in built.items() if k != "id"} == {k: v for k, v in sample.items() if k != "id"}


@pytest.mark.parametrize(
    "info, url",
    [
        ({"address": {"hostname": "m1", "ip": "10.0.0.1", "port": 5050}}, "http://10.0.0.1:5050"),
        ({"address": {"hostname": "m1", "port": 5050}}, "http://m1:5050"),
        ({"address": {"ip": "10.0.0.1", "port": 5051}, "hostname": "old"}, "http://10.0.0.1:5051"),
        ({"address": {"hostname": "", "ip": "10.0.0.1", "port": 5050}}, "http://10.0.0.1:5050"),
        ({"address": {"ip": "::1", "port": 5050}}, "http://[::1]:5050"),
        ({"hostname": "m2", "ip": 16777343, "port": 5052, "id": "x"}, "http://127.0.0.1:5052"),
        ({"hostname": "m2", "port": 5052, "id": "x"}, "http://m2:5052"),
        ({"ip": 16777343, "port": 5053, "id": "x"}, "http://127.0.0.1:5053"),
        ({"ip": 184549386, "port": 5050, "id": "x"}, "http://10.0.0.11:5050"),
        ({"pid": "master@10.1.2.3:5055", "id": "x"}, "http://10.1.2.3:5055"),
    ],
)
def test_master_url_from_info_fallbacks(info, url):
    assert master_url_from_info(json.dumps(info)) == url


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"\x0a\x24\x38\xff\xfe", "not UTF-8"),
        ("master@10.0.0.1:5050", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ("{}", "names no address"),
        ('{"address": {"hostname": "m"}}', "no valid port"),
        ('{"address": {"hostname": "m", "port": 70000}}', "no valid port"),
        ('{"address": {"hostname": "m", "port": "5050"}}', "no valid port"),
    ],
)
def test_master_url_from_info_rejects(data, reason):
    with pytest.raises(ValueError, match=reason):
        master_url_from_info(data)


def test_master_url_from_info_rejects_unknown_scheme():
    with pytest.raises(ValueError, match="scheme"):
        master_url_from_info(MASTER_INFO_JSON, scheme="ftp")


# --------------------------------------------------------------------------
# Choosing the leader (pure: no ZooKeeper)
# --------------------------------------------------------------------------


def usable(url):
    return (url, None)


def test_choose_leader_orders_by_sequence_number():
    children = ["json.info_0000000012", "log_replicas", "json.info_0000000003", "json.info_0000000007"]
    infos = {
        "json.info_0000000003": usable("http://m3:5050"),
        "json.info_0000000007": usable("http://m7:5050"),
        "json.info_0000000012": usable("http://m12:5050"),
    }
    choice = choose_leader(children, infos)
    assert choice.leader == "http://m3:5050"
    # Only the leader: whoever may add a child to the path got SUBSCRIBE and
    # its credentials when the leader did not answer.
    assert choice.candidates == ("http://m3:5050",)
    assert choice.members == ("json.info_0000000003", "json.info_0000000007", "json.info_0000000012")
    assert choice.ignored == ("log_replicas",)
    assert (choice.problem, choice.unresolved) == (None, False)


def test_choose_leader_with_gaps_compares_numbers():
    children = iter(["json.info_0000000100", "json.info_99", "json.info_0000000042"])
    infos = {
        "json.info_0000000042": usable("http://a:5050"),
        "json.info_99": usable("http://b:5050"),
        "json.info_0000000100": usable("http://c:5050"),
    }
    choice = choose_leader(children, infos)
    assert choice.leader == "http://a:5050"
    assert choice.members == ("json.info_0000000042", "json.info_99", "json.info_0000000100")
    assert choice.candidates == ("http://a:5050",)


def test_choose_leader_whose_master_info_is_unusable():
    why = "the leader's znode /mesos/json.info_0000000001 holds no usable MasterInfo: it is not valid JSON"
    infos = {"json.info_0000000001": (None, why), "json.info_0000000002": usable("http://m2:5050")}
    choice = choose_leader(list(infos), infos)
    assert choice.leader is None
    assert choice.problem == why
    assert choice.candidates == ()
    assert not choice.unresolved


def test_choose_leader_whose_znode_could_not_be_read():
    infos = {"json.info_0000000002": usable("http://m2:5050")}
    unreadable = {"json.info_0000000001": "reading /mesos/json.info_0000000001 failed: ConnectionLoss"}
    choice = choose_leader(["json.info_0000000002", "json.info_0000000001"], infos, unreadable)
    assert choice.leader is None
    assert choice.problem == "reading /mesos/json.info_0000000001 failed: ConnectionLoss"
    assert choice.unresolved
    assert choice.candidates == ()
    assert choose_leader(["json.info_0000000002"], infos, {"json.info_9": "gone"}).unresolved is False


def test_choose_leader_ignores_protobuf_info_children():
    choice = choose_leader(["log_replicas", "info_0000000001", "info_0000000000"], {})
    assert choice == Leadership(ignored=("info_0000000000", "info_0000000001", "log_replicas"))
    assert choice.leader is None and choice.members == () and choice.problem is None


def test_choose_leader_of_nothing():
    assert choose_leader([], {}) == Leadership()
    assert choose_leader([], {}).candidates == ()


# --------------------------------------------------------------------------
# Detectors
# --------------------------------------------------------------------------


def test_static_detector():
    with make_detector(parse_master("h1:5050,https://h2:5051")) as detector:
        assert isinstance(detector, StaticDetector)
        assert detector.candidates() == ("http://h1:5050", "https://h2:5051")
        assert detector.candidates(timeout=5) == ("http://h1:5050", "https://h2:5051")
        assert detector.leader() == "http://h1:5050"
        assert detector.leader(timeout=0) == "http://h1:5050"
        assert isinstance(detector.leaders_changed, threading.Event)
        assert not detector.leaders_changed.is_set()
    assert detector.closed
    detector.close()
    with pytest.raises(RuntimeError, match="closed"):
        detector.leader()
    with pytest.raises(RuntimeError, match="closed"):
        detector.candidates()


def test_make_detector_accepts_a_string_and_checks_timeouts():
    assert make_detector("m:5050", timeout=3).timeout == 3.0
    with pytest.raises(ValueError, match="timeout"):
        make_detector("m:5050", timeout=-1)
    with pytest.raises(ValueError, match="timeout"):
        make_detector("m:5050", timeout="10")
    with pytest.raises(MasterAddressError):
        make_detector("m:x")
    with pytest.raises(TypeError):
        make_detector(42)
    with pytest.raises(ValueError):
        StaticDetector([])


def test_local_has_no_detector():
    with pytest.raises(ValueError, match="embedded master"):
        make_detector(parse_master("local"))


def test_zk_detector_is_lazy():
    before = threading.active_count()
    detector = make_detector("zk://alice:pw@127.0.0.1:1/mesos", timeout=1, scheme="https")
    assert isinstance(detector, ZKDetector)
    assert detector.scheme == "https"
    assert detector.zk_url == "zk://127.0.0.1:1/mesos"
    assert "pw" not in repr(detector)
    assert threading.active_count() == before
    detector.close()
    detector.close()
    with pytest.raises(RuntimeError, match="closed"):
        detector.leader()
    assert threading.active_count() == before


def test_zk_detector_checks_scheme():
    with pytest.raises(ValueError, match="scheme"):
        make_detector("zk://h:2181/mesos", scheme="ftp")


def test_connection_error_type():
    assert issubclass(MesosConnectionError, ConnectionError)


def test_detector_imports_without_tensorflow():
    code = (
        "import sys; sys.modules['tensorflow'] = None; "
        "import tfmesos.mesos.detection as d; "
        "assert 'tensorflow' not in {m.split('.')[0] for m in sys.modules if sys.modules[m]}; "
        "assert 'kazoo.client' not in sys.modules, 'kazoo is imported lazily'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_zookeeper_module_imports_kazoo_lazily():
    code = (
        "import sys; sys.modules['tensorflow'] = None; "
        "import tfmesos.mesos.zookeeper as z; "
        "assert 'kazoo' not in sys.modules, 'kazoo is imported lazily'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
