"""RecordIO, the framing of Mesos' streaming HTTP responses.

Each record is ``<decimal length>\\n<length bytes>``. The decoder is fed
bytes as they arrive from the network, in chunks of any size, and returns the
records completed so far.
"""

from typing import Optional, Union

MAX_RECORD_SIZE = 64 * 1024 * 1024
_MAX_HEADER_DIGITS = 20


class RecordIOError(ValueError):
    """The byte stream is not valid RecordIO."""


def encode(record: Union[bytes, str]) -> bytes:
    """Frame one record (bytes or str) as RecordIO bytes."""
    if isinstance(record, str):
        record = record.encode("utf-8")
    return b"%d\n%s" % (len(record), record)


class Decoder:
    """Incremental RecordIO decoder: ``feed(chunk) -> [record, ...]``."""

    def __init__(self, max_record_size: int = MAX_RECORD_SIZE) -> None:
        self._max = max_record_size
        self._buffer = bytearray()
        self._length: Optional[int] = None  # length of the record being read, once known

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        records: list[bytes] = []
        while True:
            if self._length is None:
                newline = self._buffer.find(b"\n")
                if newline < 0:
                    if len(self._buffer) > _MAX_HEADER_DIGITS:
                        raise RecordIOError("RecordIO length header too long: %r"
                                            % bytes(self._buffer[:_MAX_HEADER_DIGITS]))
                    return records
                header = bytes(self._buffer[:newline])
                if not header.isdigit():
                    raise RecordIOError("bad RecordIO length header %r" % header[:40])
                length = int(header)
                if length > self._max:
                    raise RecordIOError("RecordIO record of %d bytes exceeds the %d byte limit"
                                        % (length, self._max))
                del self._buffer[:newline + 1]
                self._length = length
            if len(self._buffer) < self._length:
                return records
            records.append(bytes(self._buffer[:self._length]))
            del self._buffer[:self._length]
            self._length = None

    @property
    def pending(self) -> int:
        """Bytes held for a record not yet complete."""
        return len(self._buffer)
