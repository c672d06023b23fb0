"""A bound on the request line's headers an HTTP server holds for one
request (``http.server`` parses them with 100 lines of 64 KiB each at most:
6.4 MB per connection before any authentication): the master's and
agents' servers, and tfmesos' bundle server, read them through one."""

import http.client


class HeaderBudget:
    """``rfile`` for ``parse_headers``: at most ``budget`` bytes in all, past
    which LineTooLong (BaseHTTPRequestHandler answers 431 and closes)."""

    def __init__(self, rfile, budget):
        self._rfile, self._budget, self._left = rfile, budget, budget

    def readline(self, size=-1):
        limit = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        line = self._rfile.readline(limit)
        self._left -= len(line)
        if self._left < 0:
            raise http.client.LineTooLong("headers over %d bytes" % self._budget)
        return line

    def __getattr__(self, name):
        return getattr(self._rfile, name)


def parse_request_within(handler, parse, budget):
    """``parse()`` (``BaseHTTPRequestHandler.parse_request``) with
    ``handler``'s headers read within ``budget`` bytes."""
    rfile = handler.rfile
    handler.rfile = HeaderBudget(rfile, budget)   # parse_headers reads lines only
    try:
        return parse()
    finally:
        handler.rfile = rfile
