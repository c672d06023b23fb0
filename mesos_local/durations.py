"""Durations as Mesos writes them (stout's ``operator<<`` of ``Duration``,
3rdparty/stout/include/stout/duration.hpp): in ``/flags``, ``/state``'s
flags, and the executor environment (``MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD``);
and as it reads them (``Duration::parse``: ``/metrics/snapshot?timeout=``)."""

_UNITS = ((7 * 86400 * 10**9, "weeks"), (86400 * 10**9, "days"), (3600 * 10**9, "hrs"),
          (60 * 10**9, "mins"), (10**9, "secs"), (10**6, "ms"), (10**3, "us"), (1, "ns"))


def stringify_duration(seconds):
    """``5secs``, ``1mins``, ``90secs``, ``1500ms``: the unit the duration
    falls in, or the next smaller one where that makes a whole number
    (stout never writes ``1.5mins``)."""
    ns = int(round(seconds * 1e9))
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    for index, (size, name) in enumerate(_UNITS):
        if ns >= size or size == 1:
            if ns % size and index + 1 < len(_UNITS) and not ns % _UNITS[index + 1][0]:
                size, name = _UNITS[index + 1]
            value = ns / size
            text = "%d" % value if value == int(value) else "%.15g" % value
            return "%s%s%s" % (sign, text, name)
    return "0ns"   # unreachable: the last unit is 1 ns


_PARSED_UNITS = {name: size for size, name in _UNITS}


class DurationError(ValueError):
    """What ``Duration::parse`` says of text that is no duration."""


def parse_duration(text):
    """Seconds of ``text`` read as stout's ``Duration::parse`` reads it: the
    digits and dots up to the first other character, then one of its units
    (``5secs``, ``1.5mins``, ``100ms``); DurationError with its words."""
    for index, char in enumerate(text):
        if char in "0123456789.":
            continue
        number = text[:index]
        try:
            value = float(number)
        except ValueError:                            # numify<double>
            raise DurationError("Failed to convert '%s' to number" % number) from None
        unit = text[index:]
        if unit not in _PARSED_UNITS:
            raise DurationError("Unknown duration unit '%s'; supported units are 'ns', 'us', "
                                "'ms', 'secs', 'mins', 'hrs', 'days', and 'weeks'" % unit)
        return int(value * _PARSED_UNITS[unit]) / 1e9
    raise DurationError("Invalid duration '%s'" % text)


__all__ = ["stringify_duration", "parse_duration", "DurationError"]
