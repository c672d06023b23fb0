"""Resource arithmetic for the local master: scalars and port ranges.

Scalars (``cpus``, ``mem``, ``disk``, ``gpus``) are kept in thousandths, as
Mesos keeps them in fixed point with three decimals, so that offers and
launches add up exactly. Ports are a sorted list of disjoint inclusive
``[begin, end]`` ranges.
"""

import math

SCALARS = ("cpus", "mem", "disk", "gpus")
KNOWN = SCALARS + ("ports",)
_MIN_CPUS = 10       # 0.01 cpus, Mesos' default minimum allocatable resources
_MIN_MEM = 32000     # 32 MB


class ResourceError(ValueError):
    """Resources in a TaskInfo that the local master cannot accept."""


def to_milli(value):
    """Mesos' ``convertToFixed`` (src/common/values.cpp:56-59):
    ``llround(value * 1000)``, halves away from zero (Python's round()
    rounds them to even: 0.0005 would be 0 here, 1 there)."""
    scaled = float(value) * 1000
    return int(math.copysign(math.floor(abs(scaled) + 0.5), scaled))


def from_milli(value):
    number = value / 1000.0
    return int(number) if number == int(number) else number


def _normalize(ranges):
    merged: list[list[int]] = []
    for begin, end in sorted(ranges):
        if merged and begin <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([begin, end])
    return merged


def _subtract_ranges(ranges, remove):
    result = [list(r) for r in ranges]
    for rb, re_ in remove:
        out = []
        for b, e in result:
            if re_ < b or rb > e:
                out.append([b, e])
                continue
            if b < rb:
                out.append([b, rb - 1])
            if re_ < e:
                out.append([re_ + 1, e])
        result = out
    return result


def _ranges_contain(ranges, wanted):
    for wb, we in wanted:
        if not any(b <= wb and we <= e for b, e in ranges):
            return False
    return True


def format_ranges(ranges):
    return "[%s]" % ", ".join("%d-%d" % (b, e) for b, e in ranges)


class Resources:
    """A bag of resources: ``scalars`` in thousandths, ``ports`` ranges."""

    __slots__ = ("scalars", "ports")

    def __init__(self, scalars=None, ports=()):
        self.scalars = {name: value for name, value in (scalars or {}).items() if value}
        self.ports = _normalize(ports)

    @classmethod
    def of(cls, cpus=0, mem=0, disk=0, gpus=0, ports=()):
        return cls({"cpus": to_milli(cpus), "mem": to_milli(mem), "disk": to_milli(disk),
                    "gpus": to_milli(gpus)}, [list(r) for r in ports])

    def copy(self):
        return Resources(dict(self.scalars), [list(r) for r in self.ports])

    def get(self, name):
        """The scalar ``name`` in its natural unit (float)."""
        return self.scalars.get(name, 0) / 1000.0

    def __bool__(self):
        return bool(self.scalars) or bool(self.ports)

    def __eq__(self, other):
        return (isinstance(other, Resources) and self.scalars == other.scalars
                and self.ports == other.ports)

    def __repr__(self):
        return "Resources(%s)" % self.describe()

    def add(self, other):
        for name, value in other.scalars.items():
            self.scalars[name] = self.scalars.get(name, 0) + value
        if other.ports:
            self.ports = _normalize(self.ports + [list(r) for r in other.ports])
        return self

    def subtract(self, other):
        for name, value in other.scalars.items():
            left = self.scalars.get(name, 0) - value
            if left > 0:
                self.scalars[name] = left
            else:
                self.scalars.pop(name, None)
        if other.ports:
            self.ports = _subtract_ranges(self.ports, other.ports)
        return self

    def contains(self, other):
        for name, value in other.scalars.items():
            if self.scalars.get(name, 0) < value:
                return False
        return _ranges_contain(self.ports, other.ports)

    def allocatable(self):
        """Worth offering, by Mesos' default ``--min_allocatable_resources``
        (``cpus:0.01|mem:32``)."""
        return (self.scalars.get("cpus", 0) >= _MIN_CPUS
                or self.scalars.get("mem", 0) >= _MIN_MEM)

    def describe(self):
        parts = ["%s:%s" % (name, from_milli(self.scalars[name]))
                 for name in SCALARS if name in self.scalars]
        if self.ports:
            parts.append("ports:%s" % format_ranges(self.ports))
        return "; ".join(parts) or "nothing"

    def to_json(self, role=None, allocation_role=None):
        """Protobuf ``Resource`` JSON list, as in an offer."""
        out = []
        for name in SCALARS:
            if name in self.scalars:
                out.append({"name": name, "type": "SCALAR",
                            "scalar": {"value": from_milli(self.scalars[name])}})
        if self.ports:
            out.append({"name": "ports", "type": "RANGES", "ranges": {
                "range": [{"begin": b, "end": e} for b, e in self.ports]}})
        for item in out:
            if role is not None:
                item["role"] = role
            if allocation_role is not None:
                item["allocation_info"] = {"role": allocation_role}
        return out

    def to_state(self):
        """The ``resources`` object of /master/state: every scalar, ports as text."""
        out = {name: from_milli(self.scalars.get(name, 0)) for name in SCALARS}
        if self.ports:
            out["ports"] = format_ranges(self.ports)
        return out


def parse(resources_json, multi_role=False, role="*"):
    """Resources named by a TaskInfo (already schema-valid JSON) -> Resources.

    Checks what the local master's agents can honour: known names, the type
    each name has in offers, unreserved (``*``) resources only, allocation to
    the framework's role, non-negative values. Raises ResourceError.
    """
    total = Resources()
    for index, item in enumerate(resources_json):
        name = item["name"]
        where = "resources[%d] (%s)" % (index, name)
        _check_item(item, where, multi_role, role)
        if name != "ports":
            if "scalar" not in item:
                raise ResourceError("%s: a SCALAR resource needs 'scalar'" % where)
            value = to_milli(item["scalar"]["value"])
            if value < 0:
                raise ResourceError("%s: negative amount %s" % (where, item["scalar"]["value"]))
            total.add(Resources({name: value}))
        else:
            total.add(_port_ranges(item, where, total))
    return total


def format_error(resources_json):
    """``Resources::validate`` (src/common/resources.cpp:838-905) of a
    TaskInfo's resources, in Mesos' words, or None. Mesos runs it on every
    task of a LAUNCH before anything else (``validateAndUpgradeResources``,
    src/common/resources_utils.cpp:735-757) and one invalid resource fails
    the whole operation: every task of it gets TASK_ERROR
    (src/master/master.cpp:4108, 4149-4153)."""
    for item in resources_json:
        kind, name = item.get("type"), item.get("name", "")
        error = None
        if not name:
            error = "Empty resource name"
        elif kind == "SCALAR":
            if "scalar" not in item or "ranges" in item or "set" in item:
                error = "Invalid scalar resource"
            elif float(item["scalar"]["value"]) != 0 and to_milli(item["scalar"]["value"]) <= 0:
                # fixed point, three decimals (src/common/values.cpp:56-59, 114-117)
                error = "Invalid scalar resource: value <= 0"
        elif kind == "RANGES":
            if "ranges" not in item or "scalar" in item or "set" in item:
                error = "Invalid ranges resource"
            else:
                ranges = [(int(r["begin"]), int(r["end"])) for r in item["ranges"].get("range", [])]
                for i, (begin, end) in enumerate(ranges):
                    if begin > end:
                        error = "Invalid ranges resource: begin > end"
                        break
                    if any(begin <= b <= end for b, _ in ranges[i + 1:]):
                        error = "Invalid ranges resource: overlapping ranges"
                        break
        elif kind == "SET":
            if "set" not in item or "scalar" in item or "ranges" in item:
                error = "Invalid set resource"
        if error is not None:
            return "Resource '%s' is invalid: %s" % (name, error)
    return None


def _check_item(item, where, multi_role, role):
    """What a Resource must be for the local master's agents to honour it."""
    name = item["name"]
    if name not in KNOWN:
        raise ResourceError("%s: the local master's agents offer no resource named %r "
                            "(only %s)" % (where, name, ", ".join(KNOWN)))
    expected = "RANGES" if name == "ports" else "SCALAR"
    if item["type"] != expected:
        raise ResourceError("%s: %r is offered as %s, not %s"
                            % (where, name, expected, item["type"]))
    if item.get("reservations") or "reservation" in item:
        raise ResourceError("%s: reserved resources are not offered by the local master"
                            % where)
    if item.get("role", "*") != "*":
        raise ResourceError("%s: role %r: only unreserved ('*') resources are offered"
                            % (where, item["role"]))
    for unsupported in ("disk", "revocable", "shared", "provider_id"):
        if unsupported in item:
            raise ResourceError("%s: '%s' resources are not supported by the local master"
                                % (where, unsupported))
    allocation = item.get("allocation_info")
    if multi_role:
        if allocation is None or "role" not in allocation:
            raise ResourceError(
                "%s: a MULTI_ROLE framework must set allocation_info.role on every "
                "resource (copy it from the offer): a Mesos master fills in the offer's "
                "where it is missing (src/master/master.cpp), the local master is "
                "stricter" % where)
        if allocation["role"] != role:
            raise ResourceError("%s: allocation_info.role %r is not the offer's role %r"
                                % (where, allocation["role"], role))
    elif allocation is not None and allocation.get("role", role) != role:
        raise ResourceError("%s: allocation_info.role %r is not the framework's role %r"
                            % (where, allocation.get("role"), role))


def _port_ranges(item, where, total):
    """The ports of a RANGES resource: no range reversed, overlapping, or in ``total``."""
    ranges = []
    for r in item.get("ranges", {}).get("range", []):
        begin, end = int(r["begin"]), int(r["end"])
        if begin > end:
            raise ResourceError("%s: range %d-%d has begin > end" % (where, begin, end))
        ranges.append([begin, end])
    for i, (b1, e1) in enumerate(ranges):
        for b2, e2 in ranges[i + 1:]:
            if b1 <= e2 and b2 <= e1:
                raise ResourceError("%s: port ranges %d-%d and %d-%d overlap"
                                    % (where, b1, e1, b2, e2))
    ports = Resources(ports=ranges)
    if total.ports and _subtract_ranges(ports.ports, total.ports) != ports.ports:
        raise ResourceError("%s: ports %s are named twice"
                            % (where, format_ranges(ports.ports)))
    return ports
