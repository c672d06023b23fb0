"""A small reader of proto2 schema files: ``.proto`` text to
``google.protobuf.descriptor_pb2.FileDescriptorProto``, so that the local
master builds Mesos' message descriptors from the vendored sources
(``mesos_local/proto/``) at run time, with no ``protoc``.

It reads what Mesos' v1 schemas use (the proto2 language guide,
https://protobuf.dev/reference/protobuf/proto2-spec/): ``syntax``,
``package``, ``import``, options (kept: ``default``, ``deprecated``;
others are skipped), messages and enums nested at any depth, ``oneof``,
``map<K, V>`` fields (a nested ``XEntry`` message with ``map_entry``, as
protoc makes them), ``reserved`` and ``extensions`` ranges. Type names are
resolved as protoc resolves them (innermost scope outwards) once every
file is read (``build``). Anything else (``extend``, ``service``,
``group``) is a ``ProtoSyntaxError``.
"""

import re
from typing import Any, Optional

from google.protobuf import descriptor_pb2

FieldProto = descriptor_pb2.FieldDescriptorProto

_SCALARS = {
    "double": FieldProto.TYPE_DOUBLE, "float": FieldProto.TYPE_FLOAT,
    "int32": FieldProto.TYPE_INT32, "int64": FieldProto.TYPE_INT64,
    "uint32": FieldProto.TYPE_UINT32, "uint64": FieldProto.TYPE_UINT64,
    "sint32": FieldProto.TYPE_SINT32, "sint64": FieldProto.TYPE_SINT64,
    "fixed32": FieldProto.TYPE_FIXED32, "fixed64": FieldProto.TYPE_FIXED64,
    "sfixed32": FieldProto.TYPE_SFIXED32, "sfixed64": FieldProto.TYPE_SFIXED64,
    "bool": FieldProto.TYPE_BOOL, "string": FieldProto.TYPE_STRING,
    "bytes": FieldProto.TYPE_BYTES,
}
_LABELS = {"optional": FieldProto.LABEL_OPTIONAL, "required": FieldProto.LABEL_REQUIRED,
           "repeated": FieldProto.LABEL_REPEATED}
_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>-?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))
  | (?P<name>\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<symbol>[{}\[\]()<>=;,])
""", re.VERBOSE | re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "?": "?"}


class ProtoSyntaxError(ValueError):
    """A schema this reader does not read: its file, line and what was wrong."""


def _unquote(text):
    body, out, i = text[1:-1], [], 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            octal = re.match(r"[0-7]{1,3}", body[i + 1:])
            if octal:
                out.append(chr(int(octal.group(), 8)))
                i += 1 + len(octal.group())
                continue
        out.append(char)
        i += 1
    return "".join(out)


def _map_entry_name(field_name):
    """protoc's ``MapEntryName``: ``offer_filters`` -> ``OfferFiltersEntry``."""
    out, upper = [], True
    for char in field_name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out) + "Entry"


class _Parser:
    def __init__(self, path, text):
        self.path = path
        self.tokens = []
        position, line = 0, 1
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None:
                raise ProtoSyntaxError("%s:%d: unexpected %r" % (path, line, text[position]))
            if match.lastgroup != "space":
                self.tokens.append((match.lastgroup, match.group(), line))
            line += match.group().count("\n")
            position = match.end()
        self.at = 0
        # (field, scope): type names to resolve once every file is read
        self.pending: list[tuple[Any, str]] = []

    # -- tokens ------------------------------------------------------------------

    def _error(self, message):
        line = self.tokens[min(self.at, len(self.tokens) - 1)][2] if self.tokens else 1
        return ProtoSyntaxError("%s:%d: %s" % (self.path, line, message))

    def peek(self):
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self, kind=None):
        if self.at >= len(self.tokens):
            raise self._error("unexpected end of file")
        token_kind, value, _ = self.tokens[self.at]
        if kind is not None and token_kind != kind:
            raise self._error("expected a %s, got %r" % (kind, value))
        self.at += 1
        return value

    def expect(self, symbol):
        value = self.take()
        if value != symbol:
            raise self._error("expected %r, got %r" % (symbol, value))

    def constant(self):
        kind, value, _ = self.tokens[self.at]
        self.at += 1
        return _unquote(value) if kind == "string" else value

    # -- the file ----------------------------------------------------------------

    def file(self):
        proto = descriptor_pb2.FileDescriptorProto(name=self.path)
        while self.peek() is not None:
            word = self.take()
            if word == "syntax":
                self.expect("=")
                syntax = self.constant()
                if syntax != "proto2":
                    raise self._error("only proto2 is read, not %s" % syntax)
                self.expect(";")
            elif word == "package":
                proto.package = self.take("name")
                self.expect(";")
            elif word == "import":
                if self.peek() in ("public", "weak"):
                    self.take()
                proto.dependency.append(_unquote(self.take("string")))
                self.expect(";")
            elif word == "option":
                self._skip_option()
            elif word == "message":
                self.message(proto.message_type.add(), proto.package)
            elif word == "enum":
                self.enum(proto.enum_type.add())
            elif word == ";":
                continue
            else:
                raise self._error("%r is not read here" % word)
        return proto

    def _skip_option(self):
        while self.take() != ";":
            pass

    def message(self, message, scope):
        message.name = self.take("name")
        scope = "%s.%s" % (scope, message.name) if scope else message.name
        self.expect("{")
        while self.peek() != "}":
            word = self.peek()
            if word == ";":
                self.take()
            elif word == "message":
                self.take()
                self.message(message.nested_type.add(), scope)
            elif word == "enum":
                self.take()
                self.enum(message.enum_type.add())
            elif word == "option":
                self.take()
                self._skip_option()
            elif word == "oneof":
                self.take()
                index = len(message.oneof_decl)
                message.oneof_decl.add(name=self.take("name"))
                self.expect("{")
                while self.peek() != "}":
                    if self.peek() == "option":
                        self.take()
                        self._skip_option()
                        continue
                    field = self.field(message, scope, FieldProto.LABEL_OPTIONAL)
                    field.oneof_index = index
                self.expect("}")
            elif word in ("reserved", "extensions"):
                self.take()
                self._ranges(message, word)
            elif word == "map":
                self.take()
                self._map(message, scope)
            elif word in _LABELS:
                self.take()
                self.field(message, scope, _LABELS[word])
            else:
                raise self._error("%r is not read in a message" % word)
        self.expect("}")

    def _ranges(self, message, word):
        while True:
            token = self.take()
            if token == ";":
                return
            if token == ",":
                continue
            if self.tokens[self.at - 1][0] == "string":
                message.reserved_name.append(_unquote(token))
                continue
            start = int(token, 0)
            end = start
            if self.peek() == "to":
                self.take()
                bound = self.take()
                end = 536870911 if bound == "max" else int(bound, 0)
            target = message.reserved_range if word == "reserved" else message.extension_range
            target.add(start=start, end=end + 1)

    def _map(self, message, scope):
        self.expect("<")
        key = self.take("name")
        self.expect(",")
        value = self.take("name")
        self.expect(">")
        name = self.take("name")
        self.expect("=")
        number = int(self.take("number"), 0)
        self._options(None)
        self.expect(";")
        entry = message.nested_type.add(name=_map_entry_name(name))
        entry.options.map_entry = True
        entry_scope = "%s.%s" % (scope, entry.name)
        for entry_name, type_name, entry_number in (("key", key, 1), ("value", value, 2)):
            field = entry.field.add(name=entry_name, number=entry_number,
                                    label=FieldProto.LABEL_OPTIONAL)
            self._type(field, type_name, entry_scope)
        field = message.field.add(name=name, number=number, label=FieldProto.LABEL_REPEATED,
                                  type=FieldProto.TYPE_MESSAGE)
        field.type_name = ".%s" % entry_scope

    def field(self, message, scope, label):
        type_name = self.take("name")
        if type_name == "group":
            raise self._error("groups are not read")
        field = message.field.add(label=label)
        field.name = self.take("name")
        self.expect("=")
        field.number = int(self.take("number"), 0)
        self._type(field, type_name, scope)
        self._options(field)
        self.expect(";")
        return field

    def _type(self, field, type_name, scope):
        if type_name in _SCALARS:
            field.type = _SCALARS[type_name]
        else:
            field.type_name = type_name
            self.pending.append((field, scope))

    def _options(self, field):
        """``[name = value, ...]``: ``default`` and ``deprecated`` kept."""
        if self.peek() != "[":
            return
        self.take()
        while True:
            name = self.take()
            if name == "(":     # a custom option: (name).sub
                while self.take() != ")":
                    pass
                while self.peek() != "=":
                    self.take()
            self.expect("=")
            value = self.constant()
            if field is not None and name == "default":
                field.default_value = value
            elif field is not None and name == "deprecated":
                field.options.deprecated = value == "true"
            if self.take() == "]":
                return

    def enum(self, enum):
        enum.name = self.take("name")
        self.expect("{")
        while self.peek() != "}":
            word = self.take()
            if word == ";":
                continue
            if word == "option":
                name = self.take()
                self.expect("=")
                value = self.constant()
                self.expect(";")
                if name == "allow_alias":
                    enum.options.allow_alias = value == "true"
                continue
            if word == "reserved":
                while self.take() != ";":
                    pass
                continue
            self.expect("=")
            value = enum.value.add(name=word, number=int(self.take("number"), 0))
            if self.peek() == "[":
                self.take()
                while True:
                    name = self.take()
                    self.expect("=")
                    setting = self.constant()
                    if name == "deprecated":
                        value.options.deprecated = setting == "true"
                    if self.take() == "]":
                        break
            self.expect(";")
        self.expect("}")


def _symbols(files):
    """Fully qualified name -> TYPE_MESSAGE or TYPE_ENUM, of every type."""
    symbols = {}

    def walk(scope, messages, enums):
        for enum in enums:
            symbols["%s.%s" % (scope, enum.name) if scope else enum.name] = FieldProto.TYPE_ENUM
        for message in messages:
            name = "%s.%s" % (scope, message.name) if scope else message.name
            symbols[name] = FieldProto.TYPE_MESSAGE
            walk(name, message.nested_type, message.enum_type)
    for proto in files:
        walk(proto.package, proto.message_type, proto.enum_type)
    return symbols


def _resolve(name, scope, symbols) -> Optional[str]:
    """protoc's scoping: ``name`` looked up in ``scope``, then each scope
    around it; a leading dot: fully qualified."""
    if name.startswith("."):
        return name[1:] if name[1:] in symbols else None
    parts = scope.split(".") if scope else []
    while True:
        candidate = ".".join(parts + [name])
        if candidate in symbols:
            return candidate
        if not parts:
            return None
        parts.pop()


def build(sources, known=()):
    """FileDescriptorProtos of ``sources`` ((path, text) pairs, each file's
    imports before it), with every type name resolved; ``known``: the
    FileDescriptorProtos of files imported but not given (``google/protobuf/
    duration.proto``)."""
    parsers = [_Parser(path, text) for path, text in sources]
    files = [parser.file() for parser in parsers]
    symbols = _symbols(list(known) + files)
    for parser in parsers:
        for field, scope in parser.pending:
            found = _resolve(field.type_name, scope, symbols)
            if found is None:
                raise ProtoSyntaxError("%s: type %r (in %s) is not defined"
                                       % (parser.path, field.type_name, scope))
            field.type = symbols[found]
            field.type_name = "." + found
    return files


__all__ = ["ProtoSyntaxError", "build"]
