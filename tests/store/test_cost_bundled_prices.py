"""The derivation prices spans in SQL from the rows store/prices/bundled.py keeps of
genai-prices' data (docs/metrics.md §11.3): the cost must be exactly what genai-prices' own
`calc_price` gives for the same usage, model and moment, rounded half to even to the
nano-dollar, over a spread of the bundled models: cache reads and writes (and a missing cache
rate at the input rate), reasoning, per-call prices, tiers by the call's own input, prices that
change on a date, and prices by the time of day.

The spans are ingested and derived like any other (one model call per trace, a run of its
own); only the expected numbers come from genai-prices.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import pytest
from genai_prices import Usage, calc_price, data_snapshot, types

from store.prices.bundled import QUANTITIES
from tests.support.trace_builder import T0_NS, TraceBuilder, open_db, store

PICO = Decimal(10) ** 12
T0 = datetime.fromtimestamp(T0_NS / 10**9, UTC)


def _prices(model: Any) -> list[Any]:
    return model.prices if isinstance(model.prices, list) else [
        types.ConditionalPrice(constraint=None, prices=model.prices)]


def _rates(price: Any) -> list[Decimal]:
    rates = []
    for key, _ in QUANTITIES:
        value = vars(price.prices).get(key)
        if isinstance(value, types.TieredPrices):
            rates += [value.base, *(tier.price for tier in value.tiers)]
        elif value is not None:
            rates.append(value)
    return rates


def _exact(model: Any) -> bool:
    """Every rate a whole number of pico-dollars per million (a few of genai-prices' rates
    carry float noise past 12 decimals; the tables round those, by design)."""
    return all((rate * PICO) == (rate * PICO).to_integral_value()
               for price in _prices(model) for rate in _rates(price))


def _features(model: Any) -> set[str]:
    found = set()
    for price in _prices(model):
        keys = {key for key, value in vars(price.prices).items() if value is not None}
        if any(isinstance(vars(price.prices)[k], types.TieredPrices) for k in keys):
            found.add("tiers")
        if isinstance(price.constraint, types.StartDateConstraint):
            found.add("dated")
        if isinstance(price.constraint, types.TimeOfDateConstraint):
            found.add("time_of_day")
        for key in ("cache_read_mtok", "cache_write_mtok", "output_reasoning_mtok",
                    "requests_kcount"):
            if key in keys:
                found.add(key)
        if "input_mtok" in keys and "cache_read_mtok" not in keys:
            found.add("cache_at_input_rate")
    return found


def _models() -> list[tuple[str, Any]]:
    """Every 12th token-priced model, and every one with a rarer feature."""
    chosen = []
    index = 0
    for provider in data_snapshot.get_snapshot().providers:
        for model in provider.models:
            if not any(_rates(price) for price in _prices(model)) or not _exact(model):
                continue
            index += 1
            if index % 12 == 0 or _features(model) & {"dated", "time_of_day", "tiers",
                                                       "output_reasoning_mtok",
                                                       "requests_kcount"}:
                chosen.append((provider.id, model))
    return chosen


def _moments(model: Any) -> list[datetime]:
    """T0, and around each constraint: a day before and a moment after a start date, inside
    and outside a time-of-day window."""
    moments = [T0]
    for price in _prices(model):
        constraint = price.constraint
        if isinstance(constraint, types.StartDateConstraint):
            start = datetime(constraint.start_date.year, constraint.start_date.month,
                             constraint.start_date.day, tzinfo=UTC)
            moments += [start - timedelta(days=1), start + timedelta(seconds=5)]
        elif isinstance(constraint, types.TimeOfDateConstraint):
            begin = datetime.combine(T0.date(), constraint.start_time)
            begin = begin if begin.tzinfo else begin.replace(tzinfo=UTC)
            moments += [begin + timedelta(minutes=1), begin - timedelta(minutes=1)]
    # a span may not start in the future (ingest refuses it)
    return [m for m in moments if datetime(2001, 1, 1, tzinfo=UTC) < m < datetime.now(UTC)]


USAGES = (  # input (cache included), cache read, cache write, output, reasoning
    (1_234, 0, 0, 567, 0),
    (52_000, 30_000, 4_000, 2_500, 1_000),
    (310_000, 200_000, 7, 9_999, 0),  # past every tier threshold of the table
    (1, 0, 0, 1, 1),
)


def test_the_sql_prices_every_sampled_model_as_genai_prices_does(tmp_path):
    models = _models()
    covered = set().union(*(_features(model) for _, model in models))
    assert {"tiers", "dated", "time_of_day", "cache_read_mtok", "cache_write_mtok",
            "cache_at_input_rate", "output_reasoning_mtok", "requests_kcount"} <= covered
    assert len(models) > 150
    b = TraceBuilder()
    expected: dict[str, int] = {}
    for provider, model in models:
        for moment in _moments(model):
            for usage in USAGES:
                name = f"{provider} {model.id} {moment.isoformat()} {usage}"
                t0_ns = int(moment.timestamp()) * 10**9 + moment.microsecond * 1000
                total = _reference(provider, model.id, usage, moment)
                if total is None:
                    continue
                expected[name] = total
                b.span(name, 0, 1_000, t0_ns=t0_ns, attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": model.id,
                    "gen_ai.provider.name": provider,
                    "gen_ai.usage.input_tokens": usage[0],
                    "gen_ai.usage.cache_read.input_tokens": usage[1],
                    "gen_ai.usage.cache_write.input_tokens": usage[2],
                    "gen_ai.usage.output_tokens": usage[3],
                    "gen_ai.usage.reasoning.output_tokens": usage[4]})
    con = open_db(tmp_path)
    try:
        store(con, b.finished())
        got = dict(con.execute(
            "SELECT s.name, m.cost_nano FROM metered_spans m JOIN spans s "
            "ON s.trace_id = m.trace_id AND s.span_id = m.span_id").fetchall())
        sources = con.execute("SELECT DISTINCT cost_source FROM metered_spans").fetchall()
    finally:
        con.close()
    assert sources == [("bundled",)]
    wrong = {name: (got.get(name), total) for name, total in expected.items()
             if got.get(name) != total}
    assert not wrong, f"{len(wrong)} of {len(expected)} differ, e.g. {list(wrong.items())[:5]}"
    assert len(expected) > 1_000


def _reference(provider: str, model_id: str, usage: tuple[int, ...], moment: datetime
               ) -> int | None:
    """genai-prices' own price, in nano-dollars rounded half to even (None: it refuses the
    usage, as for a model priced per audio hour only)."""
    try:
        found = calc_price(
            Usage(input_tokens=usage[0], cache_read_tokens=usage[1],
                  cache_write_tokens=usage[2], output_tokens=usage[3],
                  output_reasoning_tokens=usage[4]),
            model_id, provider_id=provider, genai_request_timestamp=moment)
    except (LookupError, ValueError):
        return None
    nano = (found.total_price * 10**9).quantize(Decimal(1), ROUND_HALF_EVEN)
    return int(nano)


@pytest.mark.parametrize(("model", "provider", "matched"), [
    ("gpt-4o-2024-08-06", "openai", "openai/gpt-4o"),
    ("claude-sonnet-4.5", "anthropic", "anthropic/claude-sonnet-4-5"),
    ("openai/gpt-4o-mini", "openrouter", "openrouter/openai/gpt-4o-mini"),
    ("gemini-2.5-pro", "google", "google/gemini-2.5-pro"),
    ("gpt-4o", "nonexistent-provider", None),
    ("llama-3.3-70b-local", "", None),
])
def test_a_pair_is_matched_through_genai_prices_own_lookup(tmp_path, model, provider, matched):
    from store.prices.bundled import lookup

    assert lookup(model, provider)[0] == matched


def test_a_new_bundled_table_matches_again_and_re_prices_its_runs(tmp_path):
    """A file last matched by another genai-prices release forgets its matches when a
    derivation runner starts, marks the runs priced from the bundled table (or left
    unpriced) for re-measuring, matches their models again and records the installed
    version; a reported cost is not concerned."""
    from store import pending_derivations

    b = TraceBuilder(seed=4)
    run = b.span("agent run", 0, 2_000, attributes={"budget.total_ms": 5_000})
    b.span("priced", 0, 1_000, parent=run, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
        "gen_ai.provider.name": "openai", "gen_ai.usage.input_tokens": 1_000})
    reported = b.span("agent run", 0, 2_000, attributes={"budget.total_ms": 5_000})
    b.span("reported", 0, 1_000, parent=reported, attributes={"budget.cost_usd": 0.5})
    con = open_db(tmp_path)
    try:
        store(con, b.finished())
        version = con.execute("SELECT value FROM budgetscope_meta "
                              "WHERE key = 'genai_prices_version'").fetchone()[0]
        assert version == "0.2.5"
        before = con.execute("SELECT cost_nano FROM metered_spans ORDER BY cost_nano").fetchall()
        con.execute("UPDATE budgetscope_meta SET value = '0.1.0' "
                    "WHERE key = 'genai_prices_version'")
        con.execute("UPDATE price_matches SET bundled_ref = 'stale/model'")
        derivations = pending_derivations()
        derivations.run(con)
        assert derivations.traces_derived == 1  # only the trace priced from the table
        assert con.execute("SELECT value FROM budgetscope_meta "
                           "WHERE key = 'genai_prices_version'").fetchone() == ("0.2.5",)
        assert con.execute("SELECT model_ref, bundled_ref FROM price_matches").fetchall() == [
            ("gpt-4o", "openai/gpt-4o")]
        assert con.execute("SELECT cost_nano FROM metered_spans ORDER BY cost_nano"
                           ).fetchall() == before == [(2_500_000,), (500_000_000,)]
    finally:
        con.close()
