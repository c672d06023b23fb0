// A dashboard's view of a Mesos master: the operator event stream through
// @dcos/mesos-client (dcos-labs/mesos-client 1.0.0, not this project's),
// its stream({type: "SUBSCRIBE"}), unchanged. Written for browsers (DC/OS'
// UI; it documents nothing for node): its @dcos/connections makes a global
// XMLHttpRequest, which node has not. jsdom's is a browser's, to the XHR
// standard: in LOADING, "progress" events and a growing response (the node
// XHR packages xhr2, xmlhttprequest(-ssl) and w3c-xmlhttprequest give a
// text response only once it is DONE, which a stream never is).
//
// usage: node mesos_client_stream.js MASTER_URL [TIMEOUT_S]
// Prints one JSON line per event ({"event": <the operator Event>}), then
// {"end": "complete"} when the stream ends (exit 0) or {"end": "error", ...}
// (exit 1); {"end": "timeout"} and exit 3 after TIMEOUT_S (default 60).
// Packages from NODE_PATH (the tests' npm prefix: scripts/test.sh).

"use strict";

const { JSDOM } = require("jsdom");

const [url, timeout = "60"] = process.argv.slice(2);
// A page of the master's own origin, as a dashboard served beside it.
global.XMLHttpRequest = new JSDOM("", { url: new URL("/", url).href }).window.XMLHttpRequest;
const { stream } = require("@dcos/mesos-client");

function say(record) {
  process.stdout.write(JSON.stringify(record) + "\n");
}

const timer = setTimeout(() => {
  say({ end: "timeout" });
  process.exit(3);
}, Number(timeout) * 1000);

// The client's default URL is DC/OS' proxy path ("/mesos/api/v1"); a plain
// master serves the operator API at /api/v1.
stream({ type: "SUBSCRIBE" }, url.replace(/\/$/, "") + "/api/v1").subscribe(
  record => say({ event: JSON.parse(record) }),
  error => {
    clearTimeout(timer);
    say({ end: "error", code: error.code, message: error.message,
          response: String(error.response || "").slice(0, 500) });
    process.exitCode = 1;
  },
  () => {
    clearTimeout(timer);
    say({ end: "complete" });
  }
);
