"""Authentication and TLS of the driver's requests, against a stub master
that records what it receives and answers 503 (no leader yet), or 401 as
Mesos does."""

import base64
import http.server
import ssl
import subprocess
import threading
import time

import pytest

from tfmesos.exceptions import MesosCallError, MesosConnectionError
from tfmesos.mesos import MesosSchedulerDriver, Scheduler

FRAMEWORK = {"user": "u", "name": "auth-test"}


# What a Mesos master answers a request without valid credentials: libprocess'
# Unauthorized (3rdparty/libprocess/include/process/http.hpp:730-731).
UNAUTHORIZED = (401, b"401 Unauthorized.", [("Content-Type", "text/plain; charset=utf-8"),
                                            ("WWW-Authenticate",
                                             'Basic realm="mesos-master-scheduler"')])


class StubMaster:
    def __init__(self, context=None, reply=(503, b"", ())):
        received = self.received = []
        status, body, extra = reply

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(dict(self.headers))
                self.send_response(status)
                for name, value in extra:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for_request(self, timeout=10):
        deadline = time.monotonic() + timeout
        while not self.received and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.received[0] if self.received else None

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def certificate(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@pytest.fixture
def stubs():
    made = []

    def make(context=None, reply=(503, b"", ())):
        made.append(StubMaster(context, reply))
        return made[-1]
    yield make
    for stub in made:
        stub.close()


def run_driver(master, **kwargs):
    driver = MesosSchedulerDriver(Scheduler(), FRAMEWORK, master, **kwargs)
    driver.start()
    return driver


def finish(driver):
    driver.abort()
    driver.join(timeout=10)


def tls_context(certificate):
    cert, key = certificate
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def first_request_headers(stub, master=None, **kwargs):
    driver = run_driver(master or "127.0.0.1:%d" % stub.port, **kwargs)
    try:
        return stub.wait_for_request()
    finally:
        finish(driver)


def basic(credentials):
    return "Basic " + base64.b64encode(credentials).decode()


def test_principal_and_secret_are_sent_as_basic_auth(stubs):
    headers = first_request_headers(stubs(), principal="alice", secret="s3cret")
    assert headers["Authorization"] == basic(b"alice:s3cret")


def test_credentials_come_from_the_environment(stubs, monkeypatch):
    monkeypatch.setenv("MESOS_PRINCIPAL", "bob")
    monkeypatch.setenv("MESOS_SECRET", "pw")
    assert first_request_headers(stubs())["Authorization"] == basic(b"bob:pw")


def test_no_credentials_no_authorization_header(stubs, monkeypatch):
    monkeypatch.delenv("MESOS_PRINCIPAL", raising=False)
    assert "Authorization" not in first_request_headers(stubs())


@pytest.mark.parametrize("credentials, line", [
    ({}, "the Mesos master at http://127.0.0.1:%d wants credentials: set MESOS_PRINCIPAL and "
         "MESOS_SECRET"),
    ({"principal": "alice", "secret": "wrong"},
     "the Mesos master at http://127.0.0.1:%d refused the credentials of principal 'alice': "
     "check MESOS_PRINCIPAL and MESOS_SECRET"),
])
def test_a_refused_subscription_says_which_credentials_to_set(stubs, monkeypatch, credentials,
                                                               line):
    # From the status alone: a Mesos master's 401 says no more than "401 Unauthorized.".
    monkeypatch.delenv("MESOS_PRINCIPAL", raising=False)
    monkeypatch.delenv("MESOS_SECRET", raising=False)
    stub = stubs(reply=UNAUTHORIZED)
    driver = run_driver("127.0.0.1:%d" % stub.port, **credentials)
    try:
        with pytest.raises(MesosCallError) as raised:
            driver.join(timeout=20)
    finally:
        driver.abort()
    assert str(raised.value) == line % stub.port and raised.value.status == 401
    assert "wrong" not in str(raised.value)


@pytest.mark.parametrize("body, said", [
    # The embedded master out of file descriptors: its words, not "no leader".
    (b"the local master cannot stream: [Errno 24] Too many open files (raise ulimit -n)",
     "the Mesos master at http://127.0.0.1:%d is unavailable (503): the local master cannot "
     "stream: [Errno 24] Too many open files (raise ulimit -n)"),
    # Mesos' own (src/master/http.cpp): no leader.
    (b"No leader elected", "the Mesos master at http://127.0.0.1:%d has no leader yet (503)"),
    (b"", "the Mesos master at http://127.0.0.1:%d has no leader yet (503)"),
])
@pytest.mark.waits
def test_a_503_says_what_the_master_said(stubs, body, said):
    stub = stubs(reply=(503, body, [("Content-Type", "text/plain; charset=utf-8")]))
    driver = run_driver("127.0.0.1:%d" % stub.port, connect_timeout=1.0)
    try:
        with pytest.raises(MesosConnectionError) as raised:
            driver.join(timeout=20)
    finally:
        driver.abort()
    assert str(raised.value).endswith(": " + said % stub.port), str(raised.value)


@pytest.mark.waits
def test_https_certificates_are_verified_by_default(stubs, certificate):
    stub = stubs(tls_context(certificate))
    driver = run_driver("https://127.0.0.1:%d" % stub.port, connect_timeout=1.0)
    with pytest.raises(MesosConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        driver.join(timeout=20)
    assert stub.received == []


def test_https_with_a_ca_bundle(stubs, certificate):
    stub = stubs(tls_context(certificate))
    assert first_request_headers(stub, "https://127.0.0.1:%d" % stub.port,
                                 ca_bundle=str(certificate[0])) is not None


def test_verification_off_only_when_asked(stubs, certificate):
    stub = stubs(tls_context(certificate))
    assert first_request_headers(stub, "https://127.0.0.1:%d" % stub.port,
                                 verify=False) is not None


# -- the same settings from tfrun and cluster() -------------------------------

@pytest.mark.waits
def test_tfrun_ca_bundle_and_no_verify_reach_the_driver(stubs, certificate):
    from tfrun_helpers import run_tfrun

    stub = stubs(tls_context(certificate))
    master = ["-m", "https://127.0.0.1:%d" % stub.port, "--connect-timeout", "1"]
    refused = run_tfrun(*master, "--", "true", timeout=60)
    assert refused.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in refused.stderr
    assert stub.received == []
    run_tfrun(*master, "--ca-bundle", str(certificate[0]), "--", "true", timeout=60)
    assert len(stub.received) >= 1
    insecure = run_tfrun(*master, "--no-verify", "--", "true", timeout=60)
    assert "warning: --no-verify" in insecure.stderr
    assert "CERTIFICATE_VERIFY_FAILED" not in insecure.stderr


def test_tfrun_refused_for_want_of_credentials_says_so_in_one_line(stubs, monkeypatch):
    from tfrun_helpers import run_tfrun

    monkeypatch.delenv("MESOS_PRINCIPAL", raising=False)
    monkeypatch.delenv("MESOS_SECRET", raising=False)
    stub = stubs(reply=UNAUTHORIZED)
    refused = run_tfrun("-m", "127.0.0.1:%d" % stub.port, "--", "true", timeout=60)
    assert refused.returncode == 1
    [error] = [line for line in refused.stderr.splitlines() if "error" in line]
    assert error == ("tfrun: error: the Mesos driver stopped: the Mesos master at "
                     "http://127.0.0.1:%d wants credentials: set MESOS_PRINCIPAL and "
                     "MESOS_SECRET" % stub.port), refused.stderr


def test_zk_masters_scheme_reaches_the_detector():
    driver = MesosSchedulerDriver(Scheduler(), FRAMEWORK, "zk://127.0.0.1:1/mesos",
                                  scheme="https")
    assert driver._transport._detector.scheme == "https"
    driver.abort()
