import pytest

from tfmesos.mesos import recordio


def test_records_split_across_chunks_at_every_byte():
    records = [b'{"type":"HEARTBEAT"}', b"", b"x" * 300, "snowman \u2603".encode()]
    stream = b"".join(recordio.encode(r) for r in records)
    for size in (1, 2, 3, 7, 64, len(stream)):
        decoder = recordio.Decoder()
        out = []
        for start in range(0, len(stream), size):
            out += decoder.feed(stream[start:start + size])
        assert out == records
        assert decoder.pending == 0


def test_large_record():
    big = b"a" * (5 * 1024 * 1024)
    decoder = recordio.Decoder()
    data = recordio.encode(big)
    assert decoder.feed(data[:1000]) == []
    assert decoder.feed(data[1000:]) == [big]


def test_encode_str_counts_bytes_not_characters():
    assert recordio.encode("\u2603") == b"3\n\xe2\x98\x83"


@pytest.mark.parametrize("garbage", [b"abc\n", b"-1\n", b"1 2\n", b"\n", b"0x10\n"])
def test_garbage_header_is_rejected(garbage):
    with pytest.raises(recordio.RecordIOError, match="header"):
        recordio.Decoder().feed(garbage)


def test_header_without_newline_is_bounded():
    with pytest.raises(recordio.RecordIOError, match="too long"):
        recordio.Decoder().feed(b"1" * 50)


def test_oversized_record_is_rejected_before_buffering():
    with pytest.raises(recordio.RecordIOError, match="exceeds"):
        recordio.Decoder(max_record_size=10).feed(b"11\n")
