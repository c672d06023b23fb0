"""What a master, an agent or a ZooKeeper entry says reaches a message as
one line: its control characters escaped, its line ends folded, at most
``terminal_text.MAX_QUOTED`` characters (``terminal_text.quoted``).
Before, an HTTP error's body went into the message as it came: a "master"
answering 500 with terminal escapes set colours, the window title and
cleared the screen of whoever ran tfrun or ``tfmesos runs``, and a web
server's HTML error page filled the terminal."""

import contextlib
import http.client
import http.server
import json
import threading

import pytest

from tfmesos.exceptions import MesosCallError, MesosConnectionError, MesosError
from tfmesos.mesos import MesosSchedulerDriver, Scheduler
from tfmesos.mesos.agent_files import AgentFiles, AgentFilesError
from tfmesos.mesos.http_transport import CallConnection, describe
from tfmesos.mesos.master_info import decode_master_info
from tfmesos.mesos.master_reads import MasterReader
from tfmesos.mesos.operator_stream import OperatorStream, StreamRefused
from tfmesos.terminal_text import MAX_QUOTED, printable, quoted

HOSTILE = "\x1b[31mRED\x1b]0;pwned-title\x07\x1b[2J" + 5000 * "A"
PAGE = "<!DOCTYPE HTML>\n<html>\n<head>\n<title>Error response</title>\n</head>\n" \
       "<body>\n<p>Error code: 501</p>\n</body>\n</html>\n"


@contextlib.contextmanager
def answering(body, status=500, content_type="text/plain"):
    """A server on 127.0.0.1 answering every GET and POST with ``status`` and ``body``."""
    data = body.encode("utf-8")

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def assert_quoted(message, start):
    """``message`` quotes the hostile body escaped, in one bounded line."""
    assert not any(char in message for char in "\x1b\x07\n\r"), repr(message)
    assert start + "\\x1b[31mRED\\x1b]0;pwned-title\\x07\\x1b[2JAAA" in message, message
    assert message.endswith("AAA..."), message
    assert len(message.split(start, 1)[1]) == MAX_QUOTED, message


def test_quoted_is_one_escaped_line_cut_between_escapes():
    assert quoted("a\n\n  b\r\n\tc ") == "a b c"
    assert quoted(b"caf\xc3\xa9 \xff") == "caf\u00e9 \ufffd"
    assert quoted("x" * 10, limit=8) == "xxxxx..."
    assert quoted("x" * 8, limit=8) == "x" * 8
    # An escape is never cut: \x1b (4 characters) does not fit in 5 - 3.
    assert quoted("ab\x1b" + "c" * 10, limit=8) == "ab..."
    assert quoted("\u202e" * 3, limit=10) == "\\u202e..."
    assert len(quoted(HOSTILE)) == MAX_QUOTED
    assert quoted("plain words") == printable("plain words") == "plain words"


def driver_error(url, connect_timeout, kind):
    """What a driver subscribing at ``url`` stops with: an error of ``kind``."""
    driver = MesosSchedulerDriver(Scheduler(), {"user": "u", "name": "replies"}, url,
                                  connect_timeout=connect_timeout)
    driver.start()
    try:
        with pytest.raises(kind) as info:
            driver.join(timeout=60)
    finally:
        driver.stop()   # its threads, should join return without the error
    return str(info.value)


def test_a_refused_subscribe_quotes_the_masters_answer_in_one_escaped_line():
    with answering(HOSTILE) as url:
        error = driver_error(url, 2, MesosConnectionError)
    assert_quoted(error, "refused SUBSCRIBE: HTTP 500 ")


def test_an_error_event_of_the_master_is_quoted_in_one_escaped_line():
    event = json.dumps({"type": "ERROR", "error": {"message": HOSTILE}})
    with answering("%d\n%s" % (len(event.encode()), event), 200, "application/json") as url:
        error = driver_error(url, 10, MesosError)
    assert_quoted(error, "Mesos master error: ")


def test_a_web_server_that_answers_subscribe_200_is_no_master_at_once():
    # A server that answers every request 200 text/html (a proxy, a web
    # page at the master's address) read as "the master closed the
    # subscription stream", retried for the whole --connect-timeout (60 s).
    with answering(PAGE, status=200, content_type="text/html") as url:
        error = driver_error(url, 600, MesosError)
    assert error == ("%s answered SUBSCRIBE with 200 text/html, not the event stream of a "
                     "Mesos master: is it one? (MESOS_MASTER, -m) <!DOCTYPE HTML> <html> "
                     "<head> <title>Error response</title> </head> <body> <p>Error code: 501"
                     "</p> </body> </html>" % url), error


def test_a_web_page_for_an_answer_is_one_line():
    with answering(PAGE, status=501) as url:
        with pytest.raises(MesosError) as info:
            MasterReader(url, timeout=5, environ={}).state()
    assert str(info.value) == (
        "the Mesos master at %s answered /master/state with HTTP 501 <!DOCTYPE HTML> <html> "
        "<head> <title>Error response</title> </head> <body> <p>Error code: 501</p> </body> "
        "</html>" % url)


def test_tfmesos_runs_reads_of_the_master_quote_its_answer_in_one_escaped_line():
    with answering(HOSTILE) as url:
        with pytest.raises(MesosError) as info:
            MasterReader(url, timeout=5, environ={}).state()
    assert_quoted(str(info.value), "answered /master/state with HTTP 500 ")


def test_a_refused_call_quotes_the_masters_answer_in_one_escaped_line():
    with answering(HOSTILE, status=400) as url:
        connection = CallConnection(5, None, None)
        try:
            with pytest.raises(MesosCallError) as info:
                connection.post(url, {"type": "KILL"}, None)
        finally:
            connection.close()
    assert_quoted(str(info.value), "refused KILL: HTTP 400 ")


def test_an_agents_refusal_is_quoted_in_one_escaped_line():
    with answering(HOSTILE, status=404) as url:
        files = AgentFiles(url, 5, None, None)
        try:
            with pytest.raises(AgentFilesError) as info:
                files.get("/files/browse", path="/x")
        finally:
            files.close()
    assert not any(char in str(info.value) for char in "\x1b\x07\n"), str(info.value)
    assert "/files/browse answered 404: \\x1b[31mRED" in str(info.value)


def test_the_operator_streams_refusal_is_quoted_in_one_escaped_line():
    with answering(HOSTILE, status=403) as url:
        with pytest.raises(StreamRefused) as info:
            OperatorStream(url, timeout=5)
    assert_quoted(str(info.value), "SUBSCRIBE answered HTTP 403 ")


def test_a_garbled_status_line_is_escaped():
    text = describe(http.client.BadStatusLine("\x1b]0;title\x07 HTTP/9"))
    assert text == "BadStatusLine: \\x1b]0;title\\x07 HTTP/9"
    # tfmesos' own messages are not cut (what they quote already is).
    assert describe(MesosError("x" * 300)) == "x" * 300


def test_a_zookeeper_entry_with_escapes_in_its_host_or_port_is_refused_escaped():
    url, why = decode_master_info(
        "/mesos/json.info_1", '{"address": {"hostname": "\\u001b[2Jm", "port": 5050}}', "http")
    assert url is None
    assert why.endswith("its host '\\x1b[2Jm' is no host name or IP address"), why
    url, why = decode_master_info(
        "/mesos/json.info_1", '{"address": {"hostname": "m", "port": "\\u001b[2J%s"}}'
        % ("5" * 500), "http")
    assert url is None and "\x1b" not in why and len(why) < 200, why
