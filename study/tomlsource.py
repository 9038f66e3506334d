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
        """The line where the last key of ``dotted`` is set inside its table, if found."""
        parts = dotted.split(".")
        key = re.escape(parts[-1].split("[")[0])
        table = ".".join(p for p in parts[:-1] if not p.isdigit())
        current, best = "", None
        for number, line in enumerate(self.text.splitlines(), start=1):
            stripped = line.strip()
            header = re.match(r"^\[\[?\s*([^\]]+?)\s*\]\]?", stripped)
            if header:
                current = header.group(1)
                if current == ".".join(parts) or current == ".".join(parts).split("[")[0]:
                    best = best or number
                continue
            if re.match(rf"^(\"?){key}\1\s*=", stripped) and (
                    current == table or current.endswith("." + table) or not table):
                return number
            if table and re.match(rf"^{re.escape(table)}\.{key}\s*=", stripped):
                return number
        return best

    def error(self, dotted: str, message: str) -> ProtocolError:
        return ProtocolError(self.path, self.line_of(dotted), dotted, message)


def _line_from_message(message: str) -> int | None:
    match = re.search(r"line (\d+)", message)
    return int(match.group(1)) if match else None
