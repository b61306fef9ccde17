"""Source providers: one interface (list files, read a file) over the places framework sources live."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from sftl.errors import SourceError


class SourceProvider(Protocol):
    """Framework sources at one release; every path is repository-relative, '/'-separated."""

    framework: str  # "pytorch" | "tensorflow"
    version: str | None
    description: str  # for reports: where the files came from

    def list_files(self) -> list[str]: ...

    def read_text(self, path: str) -> str | None:
        """The file's text, or None when the provider does not hold it."""
        ...


_SKIP_DIRS = {".git", "__pycache__", "node_modules", "third_party", "build", ".venv"}


class LocalTree:
    """A local checkout laid out like the framework's repository (`--source-root DIR`)."""

    def __init__(self, root: str | Path, framework: str, version: str | None = None) -> None:
        self.root = Path(root).expanduser()
        if not self.root.is_dir():
            raise SourceError(f"source root {self.root} is not a directory")
        self.framework = framework
        self.version = version
        self.description = f"local tree {self.root}"
        self._files: list[str] | None = None

    def list_files(self) -> list[str]:
        if self._files is None:
            files: list[str] = []
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
                rel = os.path.relpath(dirpath, self.root)
                prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
                files.extend(prefix + f for f in sorted(filenames))
            self._files = files
        return self._files

    def read_text(self, path: str) -> str | None:
        full = self.root / path
        try:
            return full.read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        except OSError as exc:
            raise SourceError(f"cannot read {full}: {exc.strerror or exc}") from exc
