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
// Prints one JSON line per event ({"event": <the operator Event>}); once a
// TASK_UPDATED says a task is TASK_FINISHED, the client's request() of
// GET_TASKS ({"request": "GET_TASKS", "response": <the Response>} or
// {"request": ..., "error": ...}); then
// {"end": "complete"} when the stream ends (exit 0) or {"end": "error", ...}
// (exit 1); {"end": "timeout"} and exit 3 after TIMEOUT_S (default 60).
// Packages from NODE_PATH (the tests' npm prefix: scripts/test.sh).

"use strict";

const { JSDOM } = require("jsdom");

const [url, timeout = "60"] = process.argv.slice(2);
// A page of the master's own origin, as a dashboard served beside it.
global.XMLHttpRequest = new JSDOM("", { url: new URL("/", url).href }).window.XMLHttpRequest;
const { request, stream } = require("@dcos/mesos-client");

function say(record) {
  process.stdout.write(JSON.stringify(record) + "\n");
}

const timer = setTimeout(() => {
  say({ end: "timeout" });
  process.exit(3);
}, Number(timeout) * 1000);

// The client's default URL is DC/OS' proxy path ("/mesos/api/v1"); a plain
// master serves the operator API at /api/v1.
const api = url.replace(/\/$/, "") + "/api/v1";

function finished(event) {
  return event.type === "TASK_UPDATED" &&
    event.task_updated.status.state === "TASK_FINISHED";
}

stream({ type: "SUBSCRIBE" }, api).subscribe(
  record => {
    const event = JSON.parse(record);
    say({ event });
    if (finished(event)) {
      request({ type: "GET_TASKS" }, api).subscribe(
        response => say({ request: "GET_TASKS", response: JSON.parse(response) }),
        error => say({ request: "GET_TASKS", error: { code: error.code,
                                                      message: error.message } })
      );
    }
  },
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
