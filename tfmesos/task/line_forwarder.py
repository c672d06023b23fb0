"""How a replica task's output goes to tfrun (``LineForwarder``): in lines
and bounded fragments, an unfinished line (a progress bar's ``\r``) at
most ``FLUSH_INTERVAL`` late, a line past ``MAX_LINE`` cut with
``CUT_MARKER`` (replica.py's pumps feed it)."""

import re
import time

FLUSH_INTERVAL = 0.2        # an unfinished line (progress) goes out at most this late
MAX_LINE = 64 * 1024        # characters of one line (or \r state) forwarded; the rest is cut
MAX_FRAGMENT = 32 * 1024    # characters per log frame: <= 384 KiB as JSON, under wire.MAX_FRAME
CUT_MARKER = "[... %d characters cut]"

_LINE_BREAKS = re.compile("([\r\n])")


class LineForwarder:
    """One output stream's text in, fragments to forward out (pure: the
    caller reads, sends and keeps the clock).

    Complete lines go out at once. The line being written goes out once its
    unsent part is ``interval`` old, reduced to its state after the last
    ``\\r`` (progress bars): nothing is held longer, and fast progress costs
    one fragment per interval. A line continued later is sent without a
    newline; a redrawn one starts with ``\\r``. A line (or state) is cut
    after ``max_line`` characters, with ``CUT_MARKER`` where it ends.
    Fragments have at most ``max_fragment`` characters."""

    def __init__(self, interval=FLUSH_INTERVAL, max_line=MAX_LINE, max_fragment=MAX_FRAGMENT,
                 clock=time.monotonic):
        self.interval, self.max_line, self.max_fragment = interval, max_line, max_fragment
        self.clock = clock
        self._ready = []      # text to send
        self._state = []      # unsent text of the current line's state
        self._length = 0      # characters of the current state, sent or not
        self._cut = 0         # characters of the current state cut
        self._open = False    # part of the current line was sent: the receiver is mid-line
        self._rewind = False  # the receiver must redraw the line (send "\r" first)
        self._cr = False      # a "\r" not yet followed by anything ("\r\n" is a newline)
        self._since = None    # when the unsent part of the current line began

    def feed(self, text):
        """Take ``text``; returns the fragments to send now."""
        for piece in _LINE_BREAKS.split(text):
            if piece == "\n":
                self._end_line()
            elif piece == "\r":
                self._cr = True
            elif piece:
                if self._cr:
                    self._restart()
                self._append(piece)
        return self._take(force=False)

    def poll(self):
        """The fragments due by now (an unfinished line ``interval`` old)."""
        return self._take(force=False)

    def timeout(self):
        """Seconds until ``poll`` has something; None: not before more text."""
        if not self._state:
            return None
        return max(0.0, self._since + self.interval - self.clock())

    def close(self):
        """The end of the stream: what is left, an unfinished line ended."""
        if self._open or self._state or self._cut:
            self._end_line()
        return self._take(force=True)

    def _restart(self):
        self._cr = False
        self._state, self._length, self._cut = [], 0, 0
        self._rewind = self._open

    def _append(self, piece):
        room = max(0, self.max_line - self._length)
        if len(piece) > room:
            self._cut += len(piece) - room
            piece = piece[:room]
        if piece:
            self._state.append(piece)
            self._length += len(piece)
            if self._since is None:
                self._since = self.clock()

    def _unsent(self):
        text = ("\r" if self._rewind else "") + "".join(self._state)
        self._state, self._rewind, self._since = [], False, None
        return text

    def _end_line(self):
        text = self._unsent()
        if self._cut:
            text += CUT_MARKER % self._cut
        self._ready.append(text + "\n")
        self._length, self._cut, self._open, self._cr = 0, 0, False, False

    def _take(self, force):
        if self._state and (force or self.clock() - self._since >= self.interval):
            self._ready.append(self._unsent())
            self._open = True
        text = "".join(self._ready)
        self._ready = []
        return [text[i:i + self.max_fragment] for i in range(0, len(text), self.max_fragment)]


__all__ = ["LineForwarder", "FLUSH_INTERVAL", "MAX_LINE", "MAX_FRAGMENT", "CUT_MARKER"]
