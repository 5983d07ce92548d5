"""The user's files a child compiles: hashed as compiled, cached only as checked-hash .pyc
files (sweep/child/sources.py)."""

import importlib.util
import sys
from pathlib import Path

from sweep.child import sources


def test_a_compiled_user_file_is_cached_by_its_hash_and_reused_only_for_the_same_source(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    module = tmp_path / "cached_by_hash.py"
    module.write_text("X = 1\n")
    loader = sources.ExactLoader("cached_by_hash", str(module))
    loader.get_code("cached_by_hash")
    pyc = Path(importlib.util.cache_from_source(str(module))).read_bytes()
    assert pyc[4:8] == (3).to_bytes(4, "little")  # PEP 552: hash-based, checked
    assert sources._cached_code(module.read_bytes(), str(module)) is not None
    module.write_text("X = 2\n")  # the same size: a timestamp .pyc could pass for it
    assert sources._cached_code(module.read_bytes(), str(module)) is None
    ran: dict = {}
    exec(loader.get_code("cached_by_hash"), ran)
    assert ran["X"] == 2


def test_a_cache_that_cannot_be_written_still_compiles(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)

    def refused(*args, **kwargs):
        raise PermissionError("read-only")

    monkeypatch.setattr(sources.os, "makedirs", refused)  # a read-only folder (root writes any)
    module = tmp_path / "readonly_mod.py"
    module.write_text("Y = 3\n")
    ran: dict = {}
    exec(sources.ExactLoader("readonly_mod", str(module)).get_code("readonly_mod"), ran)
    assert ran["Y"] == 3 and not (tmp_path / "__pycache__").exists()
