"""One line per goal a benchmark measures (issue 33's table), which
``all.py`` gathers into one table at the end:

    goal| MEASURE | VALUE | <= TARGET | met

``value`` is a ratio against a floor measured in the same run, or seconds
where the goal is in seconds (``unit``)."""

PREFIX = "goal|"


def report(measure, value, target, unit="x", at_most=True):
    met = value <= target if at_most else value >= target
    print("%s %s | %.2f%s | %s %g%s | %s" % (PREFIX, measure, value, unit,
                                           "<=" if at_most else ">=", target, unit,
                                           "met" if met else "MISSED"), flush=True)


def parse(line):
    """(measure, value, goal, verdict) of a ``report`` line, or None."""
    if not line.startswith(PREFIX):
        return None
    fields = [field.strip() for field in line[len(PREFIX):].split("|")]
    return tuple(fields) if len(fields) == 4 else None
