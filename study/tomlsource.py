"""Reading declarative TOML files with errors that name the file, the line and the field."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ProtocolError(ValueError):
    """A declarative file that cannot be used; says where and what."""

    def __init__(self, path: Path | str, line: int | None, field: str, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {field}: {message}")


@dataclass(frozen=True)
class TomlSource:
    """A parsed TOML document that can say on which line a dotted field is written."""

    path: Path
    text: str
    data: dict[str, Any]

    @classmethod
    def read(cls, path: Path | str) -> TomlSource:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ProtocolError(path, None, "file", f"cannot be read ({error.strerror})") from None
        return cls.parse(text, path)

    @classmethod
    def parse(cls, text: str, path: Path | str = "<protocol>") -> TomlSource:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            line = getattr(error, "lineno", None) or _line_from_message(str(error))
            raise ProtocolError(path, line, "syntax", str(error)) from None
        return cls(Path(path), text, data)

    def line_of(self, dotted: str) -> int | None:
        """The line where ``dotted`` (e.g. ``conditions.1.robot``, numbers indexing arrays
        of tables or arrays) is written; its table's header when the key is absent."""
        parts = [part for part in dotted.split(".") if part]
        while parts and parts[-1].isdigit() and not self._is_table_array(parts[:-1]):
            parts = parts[:-1]
        if not parts:
            return None
        table, key = parts[:-1], parts[-1]
        occurrences: dict[str, int] = {}
        current: list[str] = []
        headers: dict[str, int] = {}
        for number, line in enumerate(self.text.splitlines(), start=1):
            stripped = line.strip()
            header = _HEADER.match(stripped)
            if header:
                current = self._resolve(header.group(2), header.group(1) == "[[", occurrences)
                for name, path in (("self", parts), ("table", table)):
                    if current == path:
                        headers.setdefault(name, number)
                continue
            assigned = _ASSIGNMENT.match(stripped)
            if assigned and [*current, *_split_key(assigned.group(1))] == [*table, key]:
                return number
        return headers.get("self", headers.get("table"))

    def _is_table_array(self, parts: list[str]) -> bool:
        node: Any = self.data
        for part in parts:
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return False
        return isinstance(node, list) and all(isinstance(item, dict) for item in node)

    @staticmethod
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

    def error(self, dotted: str, message: str) -> ProtocolError:
        return ProtocolError(self.path, self.line_of(dotted), dotted, message)


_HEADER = re.compile(r"^(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGNMENT = re.compile(r"^([A-Za-z0-9_\-.\"' ]+?)\s*=")


def _split_key(key: str) -> list[str]:
    return [part.strip().strip("\"'") for part in key.split(".")]


def _line_from_message(message: str) -> int | None:
    match = re.search(r"line (\d+)", message)
    return int(match.group(1)) if match else None
