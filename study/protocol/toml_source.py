"""Reading declarative TOML files with errors that name the file, the line and the field.

Before ``tomllib`` parses a file, one pass over the text records where every key and table
header is written (array-of-tables positions included) and how deeply values nest, so any
later error, from a schema or from a cross-check, can be reported at its line, and bytes
that are not UTF-8 or absurdly nested values become errors rather than tracebacks.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_BYTES = 1_000_000
MAX_DEPTH = 8


class ProtocolError(ValueError):
    """A declarative file that cannot be used; says where and what."""

    def __init__(self, path: Path | str, line: int | None, field: str, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {field}: {message}")


@dataclass(frozen=True)
class Layout:
    """Where keys and headers are written: dotted path -> line, plus the deepest value."""

    keys: dict[str, int] = field(default_factory=dict)
    headers: dict[str, int] = field(default_factory=dict)
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    deepest: tuple[int, int, str] = (0, 1, "")

    def field_at(self, line: int) -> str | None:
        """The dotted key or header written on ``line`` (a multi-line value counts), if it
        is spelled like a key at all."""
        for first, last, dotted in self.spans:
            if first <= line <= last:
                return dotted if _KEY_LIKE.fullmatch(dotted) else None
        return None

    def start_of_unclosed(self, line: int) -> int:
        """``line``, or the first line of a value that is never closed and runs on to it
        (the parser notices an unclosed array only on a later line)."""
        last_line = max((last for _, last, _ in self.spans), default=line)
        for first, last, _ in self.spans:
            if first < line <= last == last_line:
                return first
        return line


@dataclass(frozen=True)
class TomlSource:
    """A parsed TOML document that can say on which line a dotted field is written."""

    path: Path
    text: str
    data: dict[str, Any]
    layout: Layout = field(default_factory=Layout)

    @classmethod
    def read(cls, path: Path | str) -> TomlSource:
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as error:
            raise ProtocolError(path, None, "file", f"cannot be read ({error.strerror})") from None
        if len(raw) > MAX_BYTES:
            raise ProtocolError(path, 1, "file", f"is {len(raw):,} bytes; a protocol is at most "
                                                 f"{MAX_BYTES:,}")
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise _not_utf8(path, raw, error) from None
        return cls.parse(text, path)

    @classmethod
    def parse(cls, text: str, path: Path | str = "<protocol>") -> TomlSource:
        layout = scan(text)
        depth, line, dotted = layout.deepest
        if depth > MAX_DEPTH:
            raise ProtocolError(path, line, dotted or "value",
                                f"nests arrays or inline tables {depth} deep; at most "
                                f"{MAX_DEPTH} levels are allowed")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            line = layout.start_of_unclosed(
                getattr(error, "lineno", None) or _line_from_message(str(error)) or 1)
            where = layout.field_at(line) or "syntax"
            raise ProtocolError(path, line, where, f"invalid TOML: {error}") from None
        except RecursionError:
            raise ProtocolError(path, line, dotted or "value", "nests too deep") from None
        except ValueError as error:  # an integer of more digits than Python converts
            line = _line_of_long_number(text)
            message = "is a number too long to read" if line else f"cannot be read: {error}"
            raise ProtocolError(path, line or 1, layout.field_at(line or 1) or "value",
                                message) from None
        return cls(Path(path), text, data, layout)

    def line_of(self, dotted: str) -> int:
        """The line where ``dotted`` (e.g. ``conditions.1.robot``, numbers indexing arrays
        of tables or arrays) is written; else that of the nearest enclosing key or table
        (for a missing key: its table's header), and line 1 for a missing top-level table."""
        parts = [part for part in re.sub(r"\[(\d+)\]", r".\1", dotted).split(".") if part]
        while parts:
            key = ".".join(parts)
            line = self.layout.keys.get(key) or self.layout.headers.get(key)
            if line is None:
                line = min((number for name, number in self.layout.headers.items()
                            if name.startswith(key + ".")), default=None)
            if line is not None:
                return line
            parts.pop()
        return 1

    def error(self, dotted: str, message: str) -> ProtocolError:
        return ProtocolError(self.path, self.line_of(dotted), dotted, message)


_KEY_LIKE = re.compile(r"[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*")
_HEADER = re.compile(r"^(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def scan(text: str) -> Layout:
    """Record the line of every key and header; never fails, whatever the text."""
    layout = Layout()
    occurrences: dict[str, int] = {}
    current: list[str] = []
    position, line, size = 0, 1, len(text)
    deepest = (0, 1, "")
    while position < size:
        start = _skip_blanks(text, position)
        end = _end_of_line(text, start)
        char = text[start] if start < size else ""
        if char == "[":
            header = _HEADER.match(text[start:end].strip())
            name = header.group(2) if header else text[start:end].strip("[] \t\r")
            current = _resolve(name, bool(header) and header.group(1) == "[[", occurrences)
            dotted = ".".join(current)
            layout.headers.setdefault(dotted, line)
            layout.spans.append((line, line, dotted))
        elif char not in ("", "#", "\n", "\r"):
            equals = _find_equals(text, start, end)
            key = text[start:equals] if equals >= 0 else text[start:end].split()[0]
            dotted = ".".join([*current, *_split_key(key)])
            first = line
            if equals >= 0:
                layout.keys.setdefault(dotted, line)
                end, line, deepest = _skip_value(text, equals + 1, line, dotted, deepest)
            layout.spans.append((first, line, dotted))
        position = end + 1
        line += 1
    return Layout(layout.keys, layout.headers, layout.spans, deepest)


def _skip_blanks(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t":
        position += 1
    return position


def _end_of_line(text: str, position: int) -> int:
    end = text.find("\n", position)
    return len(text) if end < 0 else end


def _find_equals(text: str, start: int, end: int) -> int:
    """The ``=`` of an assignment, skipping quoted key parts; -1 when there is none."""
    quote = ""
    for position in range(start, end):
        char = text[position]
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "=":
            return position
    return -1


def _skip_value(text: str, position: int, line: int, dotted: str,
                deepest: tuple[int, int, str]) -> tuple[int, int, tuple[int, int, str]]:
    """Walk one value (strings, comments, nested arrays and inline tables) to the newline
    that ends it; returns that newline's index, the line it is on and the deepest nesting
    (with the line where its value starts)."""
    depth, size, first = 0, len(text), line
    while position < size:
        char = text[position]
        if char == "\n":
            if depth <= 0:
                return position, line, deepest
            line += 1
        elif char == "#":
            position = _end_of_line(text, position)
            continue
        elif char in "\"'":
            position, line = _skip_string(text, position, line)
            continue
        elif char in "[{":
            depth += 1
            if depth > deepest[0]:
                deepest = (depth, first, dotted)
        elif char in "]}":
            depth -= 1
        position += 1
    return position, line, deepest


def _skip_string(text: str, position: int, line: int) -> tuple[int, int]:
    """Past the string opening at ``position`` (basic or literal, single or multi-line)."""
    quote = text[position] * 3 if text.startswith(text[position] * 3, position) else text[
        position]
    escapes = quote[0] == '"'
    position += len(quote)
    while position < len(text):
        if escapes and text[position] == "\\":
            line += text[position + 1:position + 2] == "\n"
            position += 2
            continue
        if text.startswith(quote, position):
            return position + len(quote), line
        if text[position] == "\n":
            if len(quote) == 1:
                return position, line
            line += 1
        position += 1
    return position, line


def _resolve(name: str, is_array: bool, occurrences: dict[str, int]) -> list[str]:
    """A header's path with array-of-tables positions, e.g. ``conditions.1``."""
    path = _split_key(name)
    if is_array:
        key = ".".join(path)
        occurrences[key] = occurrences.get(key, -1) + 1
        return [*path, str(occurrences[key])]
    for size in range(len(path), 0, -1):
        key = ".".join(path[:size])
        if key in occurrences:
            return [*path[:size], str(occurrences[key]), *path[size:]]
    return path


def _split_key(key: str) -> list[str]:
    return [part.strip().strip("\"'") for part in key.split(".")]


def _line_of_long_number(text: str) -> int | None:
    match = re.search(r"\d[\d_]{999,}", text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _line_from_message(message: str) -> int | None:
    match = re.search(r"line (\d+)", message)
    return int(match.group(1)) if match else None


def _not_utf8(path: Path, raw: bytes, error: UnicodeDecodeError) -> ProtocolError:
    line = raw.count(b"\n", 0, error.start) + 1
    column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
    layout = scan(raw.decode("utf-8", errors="replace"))
    return ProtocolError(path, line, layout.field_at(line) or "file",
                         f"is not UTF-8 text (byte 0x{raw[error.start]:02x} at column "
                         f"{column}); save the file as UTF-8")
