"""A pickle reader for plain data only, with a budget: what a Flight Recorder dump can cost is fixed before
it is read, whatever its bytes say.

Why not `pickle.Unpickler` with a `find_class` that refuses everything: it does refuse code, but a few
dozen bytes of plain-data opcodes still build a list that contains itself, or a "billion laughs" tree of
shared references, and a large memo index or declared length makes the C unpickler allocate gigabytes
before anything can object. Here every opcode is read by us:

- only the opcodes that build None, bools, ints, floats, str, bytes, lists, tuples and dicts exist; every
  opcode that reaches code (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT, persistent ids,
  out-of-band buffers) is refused by name, anything else is a corrupt dump;
- the number of opcodes and an estimate of the memory the objects take are capped (`Budget`); a declared
  length beyond the bytes that are there is "truncated", not an allocation;
- the memo is a dict, so a memo index of 2**32 costs one entry.

Shared references and even cycles can still be built (a memo GET is legal), so consumers walk the result
with bounded walkers (see `matcher.flight_recorder.load`). Torch writes protocol 2 with a small opcode set
(see shared/reference/log-formats.md §5.2); protocols 0-5 are read so that copies re-pickled by Python
tools load too.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class PickleRefused(Exception):
    """The pickle reaches for code: a global, a reduce/build call, a persistent id, an external buffer."""


class PickleCorrupt(Exception):
    """Truncated, malformed, or using an opcode that plain data never needs."""


class PickleTooLarge(Exception):
    """Reading it would cost more opcodes or memory than the budget allows."""


@dataclass(frozen=True, slots=True)
class Budget:
    max_ops: int = 8_000_000  # a 2,000-entry torch dump with stack frames is about 600k opcodes
    max_memory: int = 256 * 1024**2  # estimated bytes of the objects built


# Opcodes that exist only to call code: refused, with their name in the message.
_REFUSED = {
    op[0]: name
    for op, name in (
        (b"c", "GLOBAL"),
        (b"\x93", "STACK_GLOBAL"),
        (b"R", "REDUCE"),
        (b"b", "BUILD"),
        (b"i", "INST"),
        (b"o", "OBJ"),
        (b"\x81", "NEWOBJ"),
        (b"\x92", "NEWOBJ_EX"),
        (b"\x82", "EXT1"),
        (b"\x83", "EXT2"),
        (b"\x84", "EXT4"),
        (b"P", "PERSID"),
        (b"Q", "BINPERSID"),
        (b"\x97", "NEXT_BUFFER"),
        (b"\x98", "READONLY_BUFFER"),
    )
}

# Estimated memory per object kind (CPython 64-bit, rounded up).
_CONTAINER = 64
_REF = 8
_DICT_ITEM = 40
_STR = 56
_NUMBER = 32


_STRUCTS = {fmt: struct.Struct(fmt) for fmt in ("<H", "<i", "<I", "<Q", ">d")}


class _Mark:
    __slots__ = ()


_MARK = _Mark()


def loads(data: bytes, budget: Budget | None = None) -> Any:
    return _Reader(data, budget or Budget()).run()


class _Reader:
    def __init__(self, data: bytes, budget: Budget) -> None:
        self.data = data
        self.pos = 0
        self.budget = budget
        self.memory = 0
        self.stack: list[Any] = []
        self.memo: dict[int, Any] = {}

    # -- reading bytes -------------------------------------------------------------------------------

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise PickleCorrupt(
                f"truncated: needs {n} more bytes at offset {self.pos}, has {len(self.data) - self.pos}"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def line(self) -> bytes:
        """A protocol-0 text argument up to its newline (a short one: names and numbers)."""
        end = self.data.find(b"\n", self.pos, self.pos + 4096)
        if end < 0:
            raise PickleCorrupt(f"truncated or over-long text argument at offset {self.pos}")
        chunk = self.data[self.pos : end]
        self.pos = end + 1
        return chunk

    def unpack(self, fmt: str) -> Any:
        layout = _STRUCTS[fmt]
        if self.pos + layout.size > len(self.data):
            raise PickleCorrupt(f"truncated argument at offset {self.pos}")
        (value,) = layout.unpack_from(self.data, self.pos)
        self.pos += layout.size
        return value

    # -- budget ----------------------------------------------------------------------------------------

    def charge(self, cost: int) -> None:
        self.memory += cost
        if self.memory > self.budget.max_memory:
            raise PickleTooLarge(f"it would take more than {self.budget.max_memory // 1024**2} MiB of memory")

    # -- stack -----------------------------------------------------------------------------------------

    def pop(self) -> Any:
        if not self.stack or self.stack[-1] is _MARK:
            raise PickleCorrupt("stack underflow")
        return self.stack.pop()

    def pop_mark(self) -> list[Any]:
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index] is _MARK:
                items = self.stack[index + 1 :]
                del self.stack[index:]
                return items
        raise PickleCorrupt("no MARK on the stack")

    def top(self, kind: type) -> Any:
        if not self.stack or not isinstance(self.stack[-1], kind):
            raise PickleCorrupt(f"expected a {kind.__name__} on the stack")
        return self.stack[-1]

    def push_string(self, raw: bytes, as_text: bool) -> None:
        self.charge(_STR + len(raw))
        if as_text:
            try:
                self.stack.append(raw.decode("utf-8", "surrogatepass"))
            except UnicodeDecodeError as error:
                raise PickleCorrupt(f"invalid UTF-8 in a string ({error.reason})") from None
        else:
            self.stack.append(raw)

    def push_int(self, value: int, size: int = 0) -> None:
        self.charge(_NUMBER + size)
        self.stack.append(value)

    def set_items(self, target: dict[Any, Any], items: list[Any]) -> None:
        if len(items) % 2:
            raise PickleCorrupt("odd number of items for a dict")
        self.charge(_DICT_ITEM * (len(items) // 2))
        try:
            for index in range(0, len(items), 2):
                target[items[index]] = items[index + 1]
        except TypeError:  # a list or dict as a key
            raise PickleCorrupt("unhashable dict key") from None

    # -- the loop --------------------------------------------------------------------------------------

    def run(self) -> Any:
        handlers = self.handlers()
        data, max_ops = self.data, self.budget.max_ops
        size = len(data)
        for _ in range(max_ops):
            if self.pos >= size:
                raise PickleCorrupt("truncated: no STOP opcode")
            op = data[self.pos]
            self.pos += 1
            if op == 0x2E:  # STOP
                return self.pop()
            handler = handlers.get(op)
            if handler is None:
                self.unknown(op)
            else:
                handler()
        raise PickleTooLarge(f"it has more than {max_ops:,} opcodes")

    def handlers(self) -> dict[int, Callable[[], None]]:
        stack = self.stack
        take, unpack1, unpack = self.take, self.unpack1, self.unpack

        def text(n: int) -> None:
            self.push_string(take(n), True)

        def binary(n: int) -> None:
            self.push_string(take(n), False)

        def empty(value_factory: Callable[[], Any]) -> Callable[[], None]:
            def handler() -> None:
                self.charge(_CONTAINER)
                stack.append(value_factory())

            return handler

        def constant(value: Any) -> Callable[[], None]:
            return lambda: stack.append(value)

        def tuple_n(n: int) -> Callable[[], None]:
            def handler() -> None:
                if len(stack) < n or any(item is _MARK for item in stack[-n:]):
                    raise PickleCorrupt("stack underflow")
                items = tuple(stack[-n:])
                del stack[-n:]
                self.charge(_CONTAINER + _REF * n)
                stack.append(items)

            return handler

        table: dict[bytes, Callable[[], None]] = {
            b"q": lambda: self.put(unpack1()),  # BINPUT
            b"h": lambda: stack.append(self.get(unpack1())),  # BINGET
            b"X": lambda: text(unpack("<I")),  # BINUNICODE
            b"\x8c": lambda: text(unpack1()),  # SHORT_BINUNICODE
            b"\x8d": lambda: text(unpack("<Q")),  # BINUNICODE8
            b"U": lambda: text(unpack1()),  # SHORT_BINSTRING (Python 2 str, read as text like Python 3 does)
            b"T": lambda: text(unpack("<i")),  # BINSTRING
            b"C": lambda: binary(unpack1()),  # SHORT_BINBYTES
            b"B": lambda: binary(unpack("<I")),  # BINBYTES
            b"\x8e": lambda: binary(unpack("<Q")),  # BINBYTES8
            b"\x94": lambda: self.put(len(self.memo)),  # MEMOIZE
            b"K": lambda: self.push_int(unpack1()),  # BININT1
            b"M": lambda: self.push_int(unpack("<H")),  # BININT2
            b"J": lambda: self.push_int(unpack("<i")),  # BININT
            b"\x8a": lambda: self.push_long(unpack1()),  # LONG1
            b"\x8b": lambda: self.push_long(unpack("<i")),  # LONG4
            b"G": self.binfloat,  # BINFLOAT
            b"(": lambda: stack.append(_MARK),  # MARK
            b"}": empty(dict),  # EMPTY_DICT
            b"]": empty(list),  # EMPTY_LIST
            b")": empty(tuple),  # EMPTY_TUPLE
            b"u": self.setitems,  # SETITEMS
            b"s": self.setitem,  # SETITEM
            b"e": self.appends,  # APPENDS
            b"a": self.append,  # APPEND
            b"\x85": tuple_n(1),  # TUPLE1
            b"\x86": tuple_n(2),  # TUPLE2
            b"\x87": tuple_n(3),  # TUPLE3
            b"t": self.tuple_mark,  # TUPLE
            b"l": self.list_mark,  # LIST
            b"d": self.dict_mark,  # DICT
            b"N": constant(None),  # NONE
            b"\x88": constant(True),  # NEWTRUE
            b"\x89": constant(False),  # NEWFALSE
            b"r": lambda: self.put(unpack("<I")),  # LONG_BINPUT
            b"j": lambda: stack.append(self.get(unpack("<I"))),  # LONG_BINGET
            b"0": self.pop_any,  # POP
            b"1": self.drop_mark,  # POP_MARK
            b"2": lambda: stack.append(self.top(object)),  # DUP
            b"\x80": self.proto,  # PROTO
            b"\x95": lambda: unpack("<Q") and None,  # FRAME: a length hint only
            b"p": lambda: self.put(self.int_line()),  # PUT
            b"g": lambda: stack.append(self.get(self.int_line())),  # GET
            b"I": self.int_text,  # INT (protocol 0; also how it writes bools)
            b"L": self.long_text,  # LONG (protocol 0)
            b"F": self.float_text,  # FLOAT (protocol 0)
            b"V": self.unicode_text,  # UNICODE (protocol 0, raw-unicode-escape)
        }
        return {op[0]: handler for op, handler in table.items()}

    def unpack1(self) -> int:
        if self.pos >= len(self.data):
            raise PickleCorrupt("truncated argument")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def unknown(self, op: int) -> None:
        stack = self.stack
        if op == ord("c"):  # GLOBAL: name it in the refusal
            module, name = (self.line()[:100].decode(errors="replace") for _ in range(2))
            raise PickleRefused(f"the global '{module}.{name}'")
        if op == 0x93:  # STACK_GLOBAL
            # Only short strings are named: str() of a shared nested list would expand it.
            named = [item[:100] if isinstance(item, str) else "?" for item in stack[-2:]]
            raise PickleRefused(f"the global '{'.'.join(named) or '?'}'")
        if op in _REFUSED:
            raise PickleRefused(f"the opcode {_REFUSED[op]}")
        raise PickleCorrupt(f"opcode {bytes([op])!r} at offset {self.pos - 1} is not plain data")

    def push_long(self, size: int) -> None:
        raw = self.take(size)
        self.push_int(int.from_bytes(raw, "little", signed=True), size)

    def binfloat(self) -> None:
        self.charge(_NUMBER)
        self.stack.append(self.unpack(">d"))

    def drop_mark(self) -> None:
        self.pop_mark()

    def setitems(self) -> None:
        items = self.pop_mark()
        self.set_items(self.top(dict), items)

    def setitem(self) -> None:
        value, key = self.pop(), self.pop()
        self.set_items(self.top(dict), [key, value])

    def appends(self) -> None:
        items = self.pop_mark()
        self.charge(_REF * len(items))
        self.top(list).extend(items)

    def append(self) -> None:
        value = self.pop()
        self.charge(_REF)
        self.top(list).append(value)

    def tuple_mark(self) -> None:
        items = self.pop_mark()
        self.charge(_CONTAINER + _REF * len(items))
        self.stack.append(tuple(items))

    def list_mark(self) -> None:
        items = self.pop_mark()
        self.charge(_CONTAINER + _REF * len(items))
        self.stack.append(items)

    def dict_mark(self) -> None:
        items = self.pop_mark()
        self.charge(_CONTAINER)
        target: dict[Any, Any] = {}
        self.set_items(target, items)
        self.stack.append(target)

    def pop_any(self) -> None:
        if self.stack and self.stack[-1] is _MARK:
            self.stack.pop()
        else:
            self.pop()

    def proto(self) -> None:
        if self.unpack1() > 5:
            raise PickleCorrupt("unknown pickle protocol")

    def int_text(self) -> None:
        text = self.line()
        if text in (b"00", b"01"):
            self.stack.append(text == b"01")
        else:
            self.push_int(self.parse_int(text), len(text))

    def long_text(self) -> None:
        text = self.line()
        self.push_int(self.parse_int(text.rstrip(b"L")), len(text))

    def float_text(self) -> None:
        try:
            value = float(self.line())
        except ValueError:
            raise PickleCorrupt("malformed FLOAT") from None
        self.charge(_NUMBER)
        self.stack.append(value)

    def unicode_text(self) -> None:
        raw = self.line()
        self.charge(_STR + len(raw))
        try:
            self.stack.append(raw.decode("raw-unicode-escape"))
        except UnicodeDecodeError:
            raise PickleCorrupt("malformed UNICODE") from None

    def int_line(self) -> int:
        return self.parse_int(self.line())

    @staticmethod
    def parse_int(text: bytes) -> int:
        if len(text) > 40:  # memo indices and counters; Python refuses to parse past 4300 digits anyway
            raise PickleCorrupt("integer argument too long")
        try:
            return int(text)
        except ValueError:
            raise PickleCorrupt("malformed integer argument") from None

    def put(self, index: int) -> None:
        if not self.stack or self.stack[-1] is _MARK:
            raise PickleCorrupt("nothing to memoize")
        self.charge(_DICT_ITEM)
        self.memo[index] = self.stack[-1]

    def get(self, index: int) -> Any:
        try:
            return self.memo[index]
        except KeyError:
            raise PickleCorrupt(f"memo index {index} was never stored") from None
