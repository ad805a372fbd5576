"""Every .sql file of the store goes through the one SQL registry (store/file/sql_files.py):
each folder of them is loaded by load_queries, which checks every file's name header and that
the folder holds exactly the names its module registers, so no file is read around it."""

from __future__ import annotations

from pathlib import Path

import pytest

import store

# The registry's record of the folders it loaded: below the front (tests/project/test_layers.py).
from store.file.sql_files import LOADED_FOLDERS
from tests.support.paths import REPO


def test_every_sql_folder_of_the_store_is_loaded_through_the_registry() -> None:
    for name in store.ON_FIRST_USE:  # the rooms the front imports on first use
        getattr(store, name)
    folders = {path.parent.resolve() for path in (REPO / "store").rglob("*.sql")}
    missing = sorted(str(folder.relative_to(REPO)) for folder in folders - LOADED_FOLDERS)
    assert not missing, f"folders of .sql files read around the registry: {missing}"
    assert len(folders) == 11  # the walk sees file/'s two, derive/'s two, clickhouse/'s three...


def test_the_registry_refuses_a_file_without_its_header(tmp_path: Path) -> None:
    (tmp_path / "good.sql").write_text("-- name: good\n-- A query.\nSELECT 1\n")
    (tmp_path / "bad.sql").write_text("SELECT 2\n")
    with pytest.raises(store.QueryFileError, match="bad.sql: must start with"):
        store.load_queries(tmp_path, frozenset({"good", "bad"}))
    with pytest.raises(store.QueryFileError, match="unknown \\['bad'\\]"):
        store.load_queries(tmp_path, frozenset({"good"}))
