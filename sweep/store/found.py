"""Result stores found under a folder, and their size on disk (``sweep ls``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from sweep.store import attributes
from sweep.store.layout import METADATA, read_attrs


def stores(root: Path, depth: int = 4) -> Iterator[Path]:
    """Every sweep store under ``root`` (a folder whose zarr.json names a sweep)."""
    if depth < 0 or not root.is_dir():
        return
    meta = root / METADATA
    if meta.exists():
        try:
            if attributes.NAME in read_attrs(root):
                yield root
                return
        except (OSError, ValueError):
            return
    for child in sorted(root.iterdir()):
        if child.is_dir() and not child.name.startswith("."):
            yield from stores(child, depth - 1)


def size(path: Path) -> int:
    """Bytes on disk under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
