"""The vocabulary (store/rows/vocabulary.py) against the SQL: every attribute and every
value reaches both derivations, and no SQL file spells a word the vocabulary does not know."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from store import TYPED_ATTRIBUTES, clickhouse, vocabulary
from store.testing import DERIVE_QUERIES, MERGED_INTO, RECOGNISE, conventions
from tests.support.paths import REPO

# Each derivation is several files, run one after the other (store.testing.refresh_touched:
# recognition, then what depends on B; store.clickhouse.ensure_derived).
DERIVATIONS = {"duckdb": "\n".join(DERIVE_QUERIES[name].text for name in (
                   *RECOGNISE, "derive_usage", "derive_cost", "derive_measure")),
               "clickhouse": "\n".join(clickhouse.backend_queries()[name].text
                                     for name in clickhouse.DERIVE_BUILD)}
def _code(text: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


def test_spec_attributes_are_typed() -> None:
    assert set(vocabulary.BUDGET_ATTRIBUTES) <= set(TYPED_ATTRIBUTES)


@pytest.mark.parametrize("name", sorted(DERIVATIONS))
@pytest.mark.parametrize("attribute", sorted(TYPED_ATTRIBUTES))
def test_every_attribute_reaches_both_derivations(name: str, attribute: str) -> None:
    column = TYPED_ATTRIBUTES[attribute][0]
    # a status, or a quantity of §11, read under several names, merged
    column = MERGED_INTO.get(column, column)
    found = re.search(rf"\b{column}\b", _code(DERIVATIONS[name]))
    assert found, (attribute, column)


VALUES = [(group, value) for group, values in vocabulary.VOCABULARY.items() for value in values
          if value not in vocabulary.PASSED_THROUGH.get(group, frozenset())]


@pytest.mark.parametrize("name", sorted(DERIVATIONS))
@pytest.mark.parametrize(("group", "value"), VALUES)
def test_every_value_reaches_both_derivations(name: str, group: str, value: str) -> None:
    assert f"'{value}'" in _code(DERIVATIONS[name]), (group, value)


def test_passed_through_values_are_vocabulary() -> None:
    for group, values in vocabulary.PASSED_THROUGH.items():
        assert values <= set(vocabulary.VOCABULARY[group]), group


def _sql_files() -> list[Path]:
    return sorted(path for path in REPO.rglob("*.sql")
                  if not {".venv", "tests"} & set(path.relative_to(REPO).parts))


def test_no_sql_file_spells_an_unknown_word() -> None:
    """A word literal ('exhausted') in any SQL file is vocabulary or listed plumbing: a new
    class, outcome or kind written in a query without joining the vocabulary fails here."""
    known = vocabulary.known_words()
    unknown = {}
    files = _sql_files()
    assert len(files) > 40
    for path in files:
        for found in re.finditer(r"'([a-z_]+)'", _code(path.read_text(encoding="utf-8"))):
            if found[1] not in known:
                unknown.setdefault(found[1], []).append(str(path.relative_to(REPO)))
    assert unknown == {}


def test_the_check_sees_a_misspelt_word(tmp_path: Path) -> None:
    """The scan above would catch `class = 'client_timout'`."""
    text = "SELECT count(*) FILTER (WHERE class = 'client_timout') -- 'fine in a comment'"
    words = set(re.findall(r"'([a-z_]+)'", _code(text)))
    assert words - vocabulary.known_words() == {"client_timout"}


def test_conventions_use_the_vocabulary() -> None:
    assert conventions.OUTCOMES == vocabulary.CLASSES
    assert {rule.convention for rule in conventions.STEP_RULES} == set(vocabulary.CONVENTIONS)
    kinds = {rule.kind for rule in conventions.STEP_RULES} - {conventions.FROM_BUDGET_KIND}
    assert kinds <= set(vocabulary.STEP_KINDS)
    assert set(conventions.ROLL_UP_CLASSES) <= set(vocabulary.CLASSES)
    assert conventions.FALLBACK_CLASS in vocabulary.CLASSES
    for cls, _ in conventions.HTTP_CLASSES:
        assert cls in vocabulary.CLASSES
    for rule in conventions.TEXT_CLASSES:
        assert rule.result in vocabulary.CLASSES


def test_the_sdk_spells_the_same_names() -> None:
    """The budget SDK is its own distribution (it cannot import this one): same names."""
    from budgetscope_sdk import attributes

    assert frozenset(vocabulary.CLASSES) == attributes.STEP_OUTCOMES
    assert frozenset(vocabulary.RUN_OUTCOMES) == attributes.RUN_OUTCOMES
    assert frozenset(vocabulary.STEP_KINDS) == attributes.STEP_KINDS
    assert frozenset(vocabulary.SIDE_EFFECTS) == attributes.SIDE_EFFECTS
    assert frozenset(vocabulary.EFFECT_STATUSES) == attributes.EFFECT_STATUSES
    assert frozenset(vocabulary.RECONCILE_RESULTS) == attributes.RECONCILE_RESULTS
