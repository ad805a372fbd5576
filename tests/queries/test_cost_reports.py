"""The cost reports (docs/metrics.md §11.9) on the hand-worked cost fleet of
tests/support/cost_fleet.py: every column of `report cost`, `report cost-attribution` (both
dimensions), `report models`, the weekly report's appended columns, the runs report's last
three, and the headline the Overview, /metrics and `check` read. Spans are ingested and derived
through the real store; nothing derived is written by hand."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest

from queries import reports
from queries.filters import Filters
from queries.signals import recent_signals
from tests.support.cost_fleet import build_cost_fleet
from tests.support.trace_builder import open_db

# docs/metrics.md §7 and §8: the columns every earlier consumer reads, by position.
WEEKLY_COLUMNS = [
    "week", "agent", "runs", "budgeted_runs", "exhausted_runs", "exhaustion_rate",
    "utilisation_p50", "utilisation_p90", "utilisation_p99", "steps", "client_timeouts",
    "upstream_errors", "refused", "write_steps", "reconciled_writes", "reconciliation_rate",
    "orphan_writes", "top_culprit", "top_culprit_share", "partial_week"]
WEEKLY_COST_COLUMNS = [
    "tokens", "cost_usd", "incomplete_cost_runs", "unpriced_steps", "unmetered_billable_steps",
    "usd_budgeted_runs", "usd_exhausted_runs", "usd_exhaustion_rate", "cost_utilisation_p50",
    "cost_utilisation_p90", "cost_utilisation_p99", "overrun_usd", "top_cost_culprit",
    "top_cost_culprit_share", "token_budgeted_runs", "token_exhausted_runs",
    "token_utilisation_p90", "weekly_budget_usd", "weekly_budget_utilisation"]
COST_COLUMNS = [
    "run_id", "agent", "start", "tokens", "input_tokens", "cache_read_tokens",
    "cache_write_tokens", "output_tokens", "reasoning_tokens", "cost_usd", "cost_complete",
    "usd_budget", "usd_budget_source", "cost_utilisation", "usd_exhausted", "cost_culprit",
    "cost_culprit_share", "cost_crosser", "overrun_usd", "unattributed_usd", "token_budget",
    "token_budget_source", "token_utilisation", "tokens_exhausted", "token_culprit",
    "token_culprit_share", "token_crosser", "overrun_tokens", "unpriced_steps",
    "unmetered_steps", "reported_total_usd"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    con = open_db(tmp_path_factory.mktemp("cost_fleet"))
    ids = build_cost_fleet(con)
    yield con, ids
    con.close()


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts, every undefined cell None (NULL, NA and NaN alike)."""
    def plain(value: Any) -> Any:
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            return None
        return value.item() if hasattr(value, "item") else value
    return [{k: plain(v) for k, v in row.items()} for row in frame.to_dict("records")]


def usd(text: str) -> Decimal:
    return Decimal(text)


def test_cost_report_every_column(fleet) -> None:
    con, ids = fleet
    frame = reports.cost(con)
    assert list(frame.columns) == COST_COLUMNS
    rows = records(frame)
    assert [row["run_id"] for row in rows] == [ids[n] for n in ("C3", "C1", "C2", "C4")]
    by_id = {row.pop("run_id"): row for row in rows}
    # docs/metrics.md §11.6's worked example: the culprit #1 is not the crosser #4
    assert by_id[ids["C1"]] == {
        "agent": "shop", "start": "2026-11-23T10:00:00.000Z", "tokens": 126_200,
        "input_tokens": 125_000, "cache_read_tokens": 1_000, "cache_write_tokens": 0,
        "output_tokens": 1_200, "reasoning_tokens": 100, "cost_usd": usd("0.51"),
        "cost_complete": True, "usd_budget": usd("0.5"), "usd_budget_source": "span",
        "cost_utilisation": pytest.approx(1.02), "usd_exhausted": True,
        "cost_culprit": "#1 model:gpt-4o", "cost_culprit_share": pytest.approx(0.6),
        "cost_crosser": "#4 model:gpt-4o-mini", "overrun_usd": usd("0.01"),
        "unattributed_usd": usd("0"), "token_budget": 100_000, "token_budget_source": "span",
        "token_utilisation": pytest.approx(1.262), "tokens_exhausted": True,
        "token_culprit": "#1 model:gpt-4o", "token_culprit_share": pytest.approx(1.205),
        "token_crosser": "#1 model:gpt-4o", "overrun_tokens": 26_200, "unpriced_steps": 0,
        "unmetered_steps": 0, "reported_total_usd": None}
    # a lower bound: an unpriced model and a model step without usage; the declared $0.20
    assert by_id[ids["C2"]] == {
        "agent": "shop", "start": "2026-11-23T11:00:00.000Z", "tokens": 3_800,
        "input_tokens": 3_000, "cache_read_tokens": 0, "cache_write_tokens": 0,
        "output_tokens": 800, "reasoning_tokens": 0, "cost_usd": usd("0.052"),
        "cost_complete": False, "usd_budget": usd("0.2"), "usd_budget_source": "declared",
        "cost_utilisation": pytest.approx(0.26), "usd_exhausted": False,
        "cost_culprit": "#1 model:gpt-4o", "cost_culprit_share": pytest.approx(0.25),
        "cost_crosser": None, "overrun_usd": usd("0"), "unattributed_usd": usd("0"),
        "token_budget": None, "token_budget_source": None, "token_utilisation": None,
        "tokens_exhausted": None, "token_culprit": None,
        "token_culprit_share": None, "token_crosser": None, "overrun_tokens": None,
        "unpriced_steps": 1, "unmetered_steps": 1, "reported_total_usd": None}
    # parallel calls each pay in full; the crosser is another call of the culprit's key; the
    # framework's own total is shown beside the sum, never added to it
    assert by_id[ids["C3"]] == {
        "agent": "batch", "start": "2026-11-16T10:00:00.000Z", "tokens": 3_360,
        "input_tokens": 3_050, "cache_read_tokens": 0, "cache_write_tokens": 0,
        "output_tokens": 310, "reasoning_tokens": 0, "cost_usd": usd("0.76"),
        "cost_complete": True, "usd_budget": usd("0.5"), "usd_budget_source": "span",
        "cost_utilisation": pytest.approx(1.52), "usd_exhausted": True,
        "cost_culprit": "#1 model:claude", "cost_culprit_share": pytest.approx(0.8),
        "cost_crosser": "#2 model:claude", "overrun_usd": usd("0.26"),
        "unattributed_usd": usd("0.01"), "token_budget": None, "token_budget_source": None,
        "token_utilisation": None, "tokens_exhausted": None, "token_culprit": None,
        "token_culprit_share": None, "token_crosser": None, "overrun_tokens": None,
        "unpriced_steps": 0, "unmetered_steps": 0, "reported_total_usd": usd("0.99")}
    # exhausted by a gateway's refusal with no dollar budget known: budgeted, but no
    # utilisation, culprit or crosser (§11.6 defines them for a run with B$); the refused call
    # is unmetered and unbilled
    assert by_id[ids["C4"]] == {
        "agent": "batch", "start": "2026-11-23T12:00:00.000Z", "tokens": 550,
        "input_tokens": 500, "cache_read_tokens": 0, "cache_write_tokens": 0,
        "output_tokens": 50, "reasoning_tokens": 0, "cost_usd": usd("0.02"),
        "cost_complete": True, "usd_budget": None, "usd_budget_source": None,
        "cost_utilisation": None, "usd_exhausted": True, "cost_culprit": None,
        "cost_culprit_share": None, "cost_crosser": None, "overrun_usd": None,
        "unattributed_usd": usd("0"), "token_budget": None, "token_budget_source": None,
        "token_utilisation": None, "tokens_exhausted": None, "token_culprit": None,
        "token_culprit_share": None, "token_crosser": None, "overrun_tokens": None,
        "unpriced_steps": 0, "unmetered_steps": 1, "reported_total_usd": None}


def test_cost_report_filters(fleet) -> None:
    con, ids = fleet
    assert list(reports.cost(con, Filters(agent="batch"))["run_id"]) == [ids["C3"], ids["C4"]]
    window = Filters.parse("2026-11-23", "2026-11-23T11:00:00Z")
    assert list(reports.cost(con, window)["run_id"]) == [ids["C1"]]


def test_cost_attribution_in_dollars(fleet) -> None:
    con, _ = fleet
    # Dollar-exhausted: C3 and C1 with B$ 0.50 each (Σ 1.00), and C4, exhausted by a refusal
    # with no B$: it counts in exhausted_runs, not in the shares, and has no culprit.
    # claude 0.40 + 0.35 = 0.75 (C4's 0.02 has no budget to be a share of); gpt-4o 0.30;
    # gpt-4o-mini 0.12 + 0.09 = 0.21; search 0.
    assert records(reports.cost_attribution(con)) == [
        {"step_key": "model:claude", "budget_share": pytest.approx(0.75), "culprit_runs": 1,
         "crosser_runs": 1, "exhausted_runs": 2},
        {"step_key": "model:gpt-4o", "budget_share": pytest.approx(0.30), "culprit_runs": 1,
         "crosser_runs": 0, "exhausted_runs": 1},
        {"step_key": "model:gpt-4o-mini", "budget_share": pytest.approx(0.21),
         "culprit_runs": 0, "crosser_runs": 1, "exhausted_runs": 1},
        {"step_key": "tool:search", "budget_share": 0.0, "culprit_runs": 0, "crosser_runs": 0,
         "exhausted_runs": 1},
    ]
    # C1 and C3 have a crosser, neither is its culprit (#1 vs #4, #1 vs #2); unattributed:
    # C3's $0.01 over Σ B$ 1.00
    assert records(reports.cost_attribution_summary(con)) == [
        {"exhausted_runs": 3, "crossed_runs": 2, "culprit_is_crosser_rate": 0.0,
         "unattributed_share": pytest.approx(0.01)}]
    alone = records(reports.cost_attribution(con, Filters(agent="shop")))
    assert [(r["step_key"], r["budget_share"]) for r in alone] == [
        ("model:gpt-4o", pytest.approx(0.6)), ("model:gpt-4o-mini", pytest.approx(0.42)),
        ("tool:search", 0.0)]


def test_cost_attribution_in_tokens(fleet) -> None:
    con, _ = fleet
    # Token-exhausted: C1 alone, Btok 100000: gpt-4o 120500 (its culprit and crosser),
    # gpt-4o-mini 3400 + 2300 = 5700, search 0.
    expected = [
        {"step_key": "model:gpt-4o", "budget_share": pytest.approx(1.205), "culprit_runs": 1,
         "crosser_runs": 1, "exhausted_runs": 1},
        {"step_key": "model:gpt-4o-mini", "budget_share": pytest.approx(0.057),
         "culprit_runs": 0, "crosser_runs": 0, "exhausted_runs": 1},
        {"step_key": "tool:search", "budget_share": 0.0, "culprit_runs": 0, "crosser_runs": 0,
         "exhausted_runs": 1},
    ]
    assert records(reports.token_attribution(con)) == expected
    assert records(reports.cost_attribution(con, dimension="tokens")) == expected
    assert records(reports.token_attribution_summary(con)) == [
        {"exhausted_runs": 1, "crossed_runs": 1, "culprit_is_crosser_rate": 1.0,
         "unattributed_share": 0.0}]
    with pytest.raises(ValueError, match="dimension 'time'"):
        reports.cost_attribution(con, dimension="time")


def test_models_report(fleet) -> None:
    con, _ = fleet
    columns = ["model", "provider", "price_source", "spans", "input_tokens",
               "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens",
               "cost_usd"]
    frame = reports.models(con)
    assert list(frame.columns) == columns
    row = dict.fromkeys(columns[4:9], 0)
    # by known cost: claude $0.77 (three calls), gpt-4o $0.35, gpt-4o-mini $0.21, the span of
    # no model $0.01, the fine-tuned model at your price $0.002; acme-secret has no price: its
    # cost is unknown, never 0, and it comes last. C3's framework total is no metered span.
    assert records(frame) == [
        {**row, "model": "claude", "provider": None, "price_source": "reported", "spans": 3,
         "input_tokens": 3_500, "output_tokens": 350, "cost_usd": usd("0.77")},
        {**row, "model": "gpt-4o", "provider": None, "price_source": "reported", "spans": 2,
         "input_tokens": 121_000, "output_tokens": 700, "cost_usd": usd("0.35")},
        {**row, "model": "gpt-4o-mini", "provider": None, "price_source": "reported",
         "spans": 2, "input_tokens": 5_000, "cache_read_tokens": 1_000, "output_tokens": 700,
         "reasoning_tokens": 100, "cost_usd": usd("0.21")},
        {**row, "model": None, "provider": None, "price_source": "reported", "spans": 1,
         "input_tokens": 50, "output_tokens": 10, "cost_usd": usd("0.01")},
        {**row, "model": "ft:gpt-4o-mini:acme:v1", "provider": None,
         "price_source": "override", "spans": 1, "input_tokens": 1_000, "output_tokens": 500,
         "cost_usd": usd("0.002")},
        {**row, "model": "acme-secret", "provider": None, "price_source": "unpriced",
         "spans": 1, "input_tokens": 1_000, "output_tokens": 100, "cost_usd": None},
    ]
    assert [r["model"] for r in records(reports.models(con, Filters(agent="batch")))] == [
        "claude", None]


def test_weekly_report_appends_the_cost_columns(fleet) -> None:
    con, _ = fleet
    frame = reports.weekly(con)
    assert list(frame.columns) == WEEKLY_COLUMNS + WEEKLY_COST_COLUMNS
    rows = records(frame)
    assert [(r["week"], r["agent"], r["runs"], r["budgeted_runs"]) for r in rows] == [
        ("2026-W47", "batch", 1, 1), ("2026-W48", "batch", 1, 1), ("2026-W48", "shop", 2, 2)]
    cost = [{k: r[k] for k in WEEKLY_COST_COLUMNS} for r in rows]
    # W47 batch (C3): $0.76 of the default weekly $1; its culprit key claude spent 0.75 of
    # the $0.50 budget (1.5: shares are not clipped)
    assert cost[0] == {
        "tokens": 3_360, "cost_usd": usd("0.76"), "incomplete_cost_runs": 0,
        "unpriced_steps": 0, "unmetered_billable_steps": 0, "usd_budgeted_runs": 1,
        "usd_exhausted_runs": 1, "usd_exhaustion_rate": 1.0,
        "cost_utilisation_p50": pytest.approx(1.52),
        "cost_utilisation_p90": pytest.approx(1.52),
        "cost_utilisation_p99": pytest.approx(1.52), "overrun_usd": usd("0.26"),
        "top_cost_culprit": "model:claude", "top_cost_culprit_share": pytest.approx(1.5),
        "token_budgeted_runs": 0, "token_exhausted_runs": 0, "token_utilisation_p90": None,
        "weekly_budget_usd": usd("1"), "weekly_budget_utilisation": pytest.approx(0.76)}
    # W48 batch (C4): budgeted by its refusal, with no B$: no percentile, overrun or culprit
    assert cost[1] == {
        "tokens": 550, "cost_usd": usd("0.02"), "incomplete_cost_runs": 0,
        "unpriced_steps": 0, "unmetered_billable_steps": 0, "usd_budgeted_runs": 1,
        "usd_exhausted_runs": 1, "usd_exhaustion_rate": 1.0, "cost_utilisation_p50": None,
        "cost_utilisation_p90": None, "cost_utilisation_p99": None, "overrun_usd": None,
        "top_cost_culprit": None, "top_cost_culprit_share": None, "token_budgeted_runs": 0,
        "token_exhausted_runs": 0, "token_utilisation_p90": None,
        "weekly_budget_usd": usd("1"), "weekly_budget_utilisation": pytest.approx(0.02)}
    # W48 shop (C1, C2): utilisations 0.26 and 1.02, linearly interpolated: p50 0.64, p90
    # 0.944, p99 1.0124; $0.562 of its own weekly $0.50
    assert cost[2] == {
        "tokens": 130_000, "cost_usd": usd("0.562"), "incomplete_cost_runs": 1,
        "unpriced_steps": 1, "unmetered_billable_steps": 1, "usd_budgeted_runs": 2,
        "usd_exhausted_runs": 1, "usd_exhaustion_rate": 0.5,
        "cost_utilisation_p50": pytest.approx(0.64),
        "cost_utilisation_p90": pytest.approx(0.944),
        "cost_utilisation_p99": pytest.approx(1.0124), "overrun_usd": usd("0.01"),
        "top_cost_culprit": "model:gpt-4o", "top_cost_culprit_share": pytest.approx(0.6),
        "token_budgeted_runs": 1, "token_exhausted_runs": 1,
        "token_utilisation_p90": pytest.approx(1.262),
        "weekly_budget_usd": usd("0.5"), "weekly_budget_utilisation": pytest.approx(1.124)}


def test_runs_report_ends_with_tokens_and_cost(fleet) -> None:
    con, ids = fleet
    frame = reports.runs(con)
    assert list(frame.columns)[-4:] == ["root_missing", "tokens", "cost_usd", "cost_complete"]
    rows = {r["run_id"]: (r["tokens"], r["cost_usd"], r["cost_complete"])
            for r in records(frame)}
    assert rows == {ids["C1"]: (126_200, usd("0.51"), True),
                    ids["C2"]: (3_800, usd("0.052"), False),
                    ids["C3"]: (3_360, usd("0.76"), True),
                    ids["C4"]: (550, usd("0.02"), True)}


def test_headline_and_signals(fleet) -> None:
    con, _ = fleet
    row = records(reports.headline(con))[0]
    # dollars: all four runs budgeted (C4 by its refusal), C1, C3 and C4 exhausted
    assert {k: row[k] for k in (
        "usd_budgeted_runs", "usd_exhausted_runs", "token_budgeted_runs",
        "token_exhausted_runs", "tokens", "cost_nano", "incomplete_cost_runs",
        "unpriced_steps", "weekly_budget_agent", "weekly_budget_week")} == {
        "usd_budgeted_runs": 4, "usd_exhausted_runs": 3, "token_budgeted_runs": 1,
        "token_exhausted_runs": 1, "tokens": 133_910, "cost_nano": 1_342_000_000,
        "incomplete_cost_runs": 1, "unpriced_steps": 1, "weekly_budget_agent": "shop",
        "weekly_budget_week": "2026-W48"}
    assert row["usd_exhaustion_rate"] == pytest.approx(0.75)
    assert row["token_exhaustion_rate"] == 1.0
    assert row["weekly_budget_utilisation"] == pytest.approx(1.124)
    # check's window: the 7 days before 2026-11-24 leave C3 (2026-11-16) out
    signals = recent_signals(con, Filters.parse("2026-11-17", "2026-11-24"))
    assert (signals.usd_budgeted_runs, signals.usd_exhausted_runs) == (3, 2)
    assert signals.usd_exhaustion_rate == pytest.approx(2 / 3)
    assert signals.weekly_budget_utilisation == pytest.approx(1.124)
    assert (signals.weekly_budget_agent, signals.weekly_budget_week) == ("shop", "2026-W48")
    # an agent with no runs in the window: nothing to divide by, no weekly utilisation
    empty = recent_signals(con, Filters.parse("2027-01-01", "2027-01-08"))
    assert empty.usd_exhaustion_rate is None and empty.weekly_budget_utilisation is None
    assert (empty.tokens, empty.cost_nano, empty.unpriced_steps) == (0, 0, 0)
