"""Budgets: the declared budgets per agent and the default, in each of their dimensions (a duration,
tokens, dollars a run, dollars a week: docs/guide.md#declaring-budgets, docs/metrics.md §11.5,
§11.8), the per-step caps, where each run's budgets came from, and the model prices (§11.3): the
prices set, the bundled table, the models seen without a price. Inside `budgetscope serve`, forms
change them through the server's writer, with the checks and the store functions `budgetscope
budgets` and `budgetscope prices` use; standalone, the commands that do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import data, fmt, page_context, tables
from dashboard.metrics import Metric, headline
from store import (
    DIMENSIONS,
    Change,
    DeclarationError,
    PriceChange,
    PriceError,
    format_day,
    format_usd_per_mtok,
    parse_duration_ms,
    parse_from,
    parse_rate,
    parse_tokens,
    parse_usd_nano,
)

ctx = page_context.current()
DEFAULT = "(default: every agent without its own)"
MESSAGE = "_budgets_message"
ANY_PROVIDER = "(any provider)"
DIMENSION_WORDS = {"time": "duration", "tokens": "tokens", "usd": "dollars a run",
                   "usd_per_week": "dollars a week"}

st.title("Budgets")
st.caption("The usual instrumentations send no `budget.total_ms`, `budget.total_tokens` or "
           "`budget.total_usd`. A budget declared for an agent, or a default for every agent, "
           "measures that agent's runs without their own, each dimension on its own (a "
           "duration, tokens, dollars a run; dollars a week for the weekly report); a run's "
           "own budget always wins. A cap declared for a step key gives its steps without "
           "`budget.allocated_ms` the allocation min(cap, budget left when the step starts), "
           "for step utilisation. A change re-measures past runs too; on a large file that "
           "takes a while, and the tables follow once it is done.")


def _say(kind: str, text: str) -> None:
    st.session_state[MESSAGE] = (kind, text)


def _apply(change_of: Callable[[], Change]) -> None:
    """A form's callback (runs before the page redraws, so the tables show the change)."""
    try:
        change = change_of()
        outcome = data.change_declaration(change)
    except DeclarationError as error:
        _say("error", str(error))
        return
    except Exception as error:  # noqa: BLE001 - the server stopping, the disk full: a message
        _say("error", f"could not store the change: {error}")
        return
    applied = outcome.applied
    if not applied.changed:
        text = "Nothing changed: that is already what is declared."
    else:
        derived = (f"re-derived in {outcome.seconds:.2f} s" if outcome.derived
                   else "being re-derived (the tables follow once it is done)")
        text = f"Stored. {fmt.plural(applied.runs, 'run')} {derived}."
    _say("success", text)


def _apply_price(change_of: Callable[[], PriceChange]) -> None:
    """A price form's callback: stored through the server's writer, the runs it re-prices
    re-measured before the page redraws (as `budgetscope prices set` waits for them)."""
    try:
        change = change_of()
        outcome = data.change_price(change)
    except (PriceError, DeclarationError) as error:
        _say("error", str(error))
        return
    except Exception as error:  # noqa: BLE001 - a message, never a traceback
        _say("error", f"could not store the price: {error}")
        return
    applied = outcome.applied
    if not applied.changed:
        text = ("Nothing changed: that price is already set." if change.action == "set"
                else "Nothing changed: no such price was set.")
    else:
        derived = (f"re-measured in {outcome.seconds:.2f} s" if outcome.derived
                   else "being re-measured (the tables follow once it is done)")
        text = f"Stored. {fmt.plural(applied.runs, 'run')} {derived}."
        if change.action == "set" and not applied.matching_spans:
            text += (f" No stored call of model {change.model!r} yet: the price applies to "
                     "those that arrive.")
    _say("success", text)


def _sources(column: pd.Series) -> pd.Series:
    return column.fillna("unknown").value_counts() if len(column) else pd.Series(dtype="int64")


runs = data.report("runs", ctx.filters)
sources = _sources(runs["budget_source"])
headline([
    Metric("Runs with their own budget", f"{int(sources.get('span', 0)):,}",
           help="budget_source = span: the run carries budget.total_ms"),
    Metric("Runs measured against a declared budget", f"{int(sources.get('declared', 0)):,}",
           help="budget_source = declared: their agent's budget, else the default"),
    Metric("Runs with no budget", f"{int(sources.get('unknown', 0)):,}",
           help="no budget.total_ms and nothing declared: budget metrics skip them"),
], key="budgets_headline")
cost = data.report("cost", ctx.filters)
by_dimension = pd.DataFrame([
    {"budget": word, **{where: int(counted.get(source, 0)) for where, source in (
        ("the run's own", "span"), ("declared", "declared"), ("none", "unknown"))}}
    for word, counted in (("duration", sources),
                          ("tokens", _sources(cost["token_budget_source"])),
                          ("dollars a run", _sources(cost["usd_budget_source"])))])
st.caption("Where each run's budget came from, per dimension (budget_source, "
           "token_budget_source and usd_budget_source in the reports), over the time range:")
tables.table(by_dimension, hide_index=True, key="budget_sources_table")

notice = st.session_state.pop(MESSAGE, None)
if notice is not None:
    (st.error if notice[0] == "error" else st.success)(fmt.escape_md(notice[1]))

declared = data.declarations()
if declared is None:
    st.info("On the ClickHouse backend the declarations and prices are not shown here: "
            "`budgetscope --backend URL budgets list` and `prices list` show them.")
    st.stop()
budgets = declared[declared["what"] == "budget"]
caps = declared[declared["what"] == "cap"]


def _usd(nano: Any) -> str:
    return fmt.NO_VALUE if nano is None else fmt.usd_nano(int(nano))


st.subheader("Declared budgets")
if budgets.empty:
    st.caption("None declared.")
else:
    tables.table(pd.DataFrame({
        "agent": [DEFAULT if fmt.missing(t) else t for t in budgets["target"]],
        "budget": [fmt.duration(ms) for ms in budgets["duration_ms"]],
        "budget_ms": budgets["duration_ms"].astype("Int64"),
        "tokens": budgets["tokens"].map(lambda n: fmt.NO_VALUE if n is None else fmt.count(n)),
        "dollars a run": budgets["usd_nano"].map(_usd),
        "dollars a week": budgets["usd_per_week_nano"].map(_usd),
        "declared_at": budgets["declared_at"],
    }), hide_index=True, key="declared_budgets_table",
        column_config={"budget": st.column_config.TextColumn(
            "duration", help="the run's deadline is its start plus this"),
                       "dollars a week": st.column_config.TextColumn(
            "dollars a week", help="what the agent's runs may spend in an ISO week: the "
            "weekly report's weekly_budget_usd (docs/metrics.md §11.8)")})

st.subheader("Declared step caps")
if caps.empty:
    st.caption("None declared.")
else:
    tables.table(pd.DataFrame({
        "step_key": caps["target"],
        "cap": [fmt.duration(ms) for ms in caps["duration_ms"]],
        "cap_ms": caps["duration_ms"].astype("int64"),
        "declared_at": caps["declared_at"],
    }), hide_index=True, key="declared_caps_table")

# ---- prices --------------------------------------------------------------------------------
st.subheader("Model prices")
found = data.price_listing()
# the entries as the store gives them (whole numbers stay whole: no float column)
overrides: list[dict[str, Any]] = list((found or {}).get("overrides", []))
bundled: dict[str, Any] = dict((found or {}).get("bundled", {}))
st.caption(fmt.escape_md(
    "A call that reports no cost is priced at the rate in force when it started: your price "
    "for its model (an exact name before a prefix*, a provider before any, the latest --from "
    "at or before the call), else the bundled table"
    + (f" ({bundled.get('name')} {bundled.get('version')}, "
       f"{int(bundled.get('models', 0)):,} models, never fetched)" if bundled else "")
    + ". USD per million tokens; a cache rate left out is the input rate. A change re-prices "
      "every run it concerns, past ones included; a cost a span reported never changes "
      "(docs/metrics.md §11.3, §11.8)."))
if not overrides:
    st.caption("No price set.")
else:
    tables.table(pd.DataFrame({
        "model": [row["model"] for row in overrides],
        "provider": [row["provider"] or ANY_PROVIDER for row in overrides],
        "from": [format_day(row["from_ns"]) or "the beginning" for row in overrides],
        **{label: [fmt.NO_VALUE if row[column] is None
                   else f"${format_usd_per_mtok(row[column])}" for row in overrides]
           for label, column in (("input", "input_rate"), ("output", "output_rate"),
                                 ("cache read", "cache_read_rate"),
                                 ("cache write", "cache_write_rate"))},
        "declared_at": [row["declared_at"] for row in overrides],
    }), hide_index=True, key="prices_table")
check = data.price_check()
if not check.empty:
    st.markdown(f"**{fmt.plural(len(check), 'model')} seen without a price** (their calls' "
                "cost is unknown, never $0; `budgetscope prices check`):")
    tables.table(check.drop(columns=["command"]).assign(
        model=check["model"].map(lambda m: "(no model named)" if fmt.missing(m) else m),
        provider=check["provider"].map(fmt.text)), hide_index=True, key="unpriced_table",
        height=tables.table_height(len(check), most=10))

if data.budget_editor() is None:
    st.info("Read-only here: this dashboard does not own the database. Change declarations "
            "and prices with the command line, which goes to the server when `budgetscope "
            "serve` holds the file, or in the dashboard that `budgetscope serve` runs:")
    # the file, or the ClickHouse backend (its URL as status shows it: without a password)
    db = f"{'--db' if data.backend_url() is None else '--backend'} {ctx.status.path}"
    commands = [f"budgetscope {db} budgets set AGENT 45s --tokens 200k --usd 0.50",
                f"budgetscope {db} budgets set AGENT --usd-per-week 20",
                f"budgetscope {db} budgets set --default 60s",
                f"budgetscope {db} budgets unset AGENT --tokens",
                f"budgetscope {db} budgets cap tool:fetch_report 9s"]
    commands += [f"budgetscope {db} {c.removeprefix('budgetscope ')}"
                 for c in check["command"] if c]
    commands += [f"budgetscope {db} prices set 'ft:gpt-4o-mini:acme:*' --input 0.30 "
                 "--output 1.20",
                 f"budgetscope {db} prices list"]
    st.code("\n".join(commands), language="bash")
    st.stop()

# ---- forms (inside serve) ------------------------------------------------------------------
st.subheader("Change")


def _given(key: str, parse: Callable[[str, str], int], what: str) -> int | None:
    """A form field parsed by the store's own parser (the CLI's); None when left empty."""
    text = str(st.session_state.get(key) or "").strip()
    return parse(text, what) if text else None


left, right = st.columns(2)
with left:
    with st.form("declare_budget", clear_on_submit=False, border=True):
        st.markdown("**Declare a budget**")
        st.selectbox("Agent", [DEFAULT, *ctx.status.agents], key="declare_agent",
                     accept_new_options=True,
                     help="As reports name it: gen_ai.agent.name, else the service.name. "
                          "Type a name not seen yet to declare it ahead of its runs.")
        st.text_input("Budget", key="declare_budget_text", placeholder="e.g. 45s, 2500ms, 5m",
                      help="A duration; left empty: the duration stays as declared.")
        st.text_input("Tokens", key="declare_tokens_text", placeholder="e.g. 200k, 1.5M",
                      help="A token budget per run (budgets set --tokens).")
        st.text_input("Dollars a run", key="declare_usd_text", placeholder="e.g. 0.50",
                      help="A dollar budget per run, up to 9 decimals (budgets set --usd).")
        st.text_input("Dollars a week", key="declare_week_text", placeholder="e.g. 20",
                      help="What the agent's runs may spend in an ISO week (budgets set "
                           "--usd-per-week): the weekly report measures against it.")

        def _declare() -> Change:
            agent = st.session_state.get("declare_agent") or DEFAULT
            dimensions = (_given("declare_budget_text", parse_duration_ms, "budget"),
                          _given("declare_tokens_text", parse_tokens, "token budget"),
                          _given("declare_usd_text", parse_usd_nano, "dollar budget"),
                          _given("declare_week_text", parse_usd_nano, "weekly dollar budget"))
            return Change("set_default", None, *dimensions) if agent == DEFAULT else \
                Change("set", agent, *dimensions)

        st.form_submit_button("Declare", key="declare_submit", on_click=_apply, args=(_declare,))
    if not budgets.empty:
        with st.form("remove_budget", border=True):
            st.markdown("**Remove a budget**")
            st.selectbox("Declared budget", [DEFAULT if fmt.missing(t) else t
                                             for t in budgets["target"]], key="remove_agent")
            st.multiselect("Dimensions", list(DIMENSIONS), key="remove_dimensions",
                           format_func=DIMENSION_WORDS.get, placeholder="all of them",
                           help="Only these (budgets unset --time/--tokens/--usd/"
                                "--usd-per-week); none chosen: the whole declaration.")

            def _remove() -> Change:
                agent = st.session_state.get("remove_agent")
                dimensions = tuple(st.session_state.get("remove_dimensions") or ())
                return Change("unset_default", dimensions=dimensions) if agent == DEFAULT \
                    else Change("unset", agent, dimensions=dimensions)

            st.form_submit_button("Remove", key="remove_submit", on_click=_apply, args=(_remove,))
with right:
    known_keys = sorted(set(data.report("failures", ctx.filters)["step_key"].dropna()))
    with st.form("declare_cap", border=True):
        st.markdown("**Declare a step cap**")
        st.text_input("Step key", key="cap_key", placeholder="kind:name, e.g. tool:fetch_report",
                      help="kind:name with a kind of model, tool, subagent, backoff, queue, "
                           "reconcile or other; a key not seen yet is allowed. Seen in this "
                           "range: " + (", ".join(known_keys[:20]) or "none"))
        st.text_input("Cap", key="cap_text", placeholder="e.g. 9s")

        def _cap() -> Change:
            ms = parse_duration_ms(st.session_state.get("cap_text", ""), "cap")
            return Change("cap", st.session_state.get("cap_key") or "", ms)

        st.form_submit_button("Declare cap", key="cap_submit", on_click=_apply, args=(_cap,))
    if not caps.empty:
        with st.form("remove_cap", border=True):
            st.markdown("**Remove a step cap**")
            st.selectbox("Declared cap", list(caps["target"]), key="uncap_key")
            st.form_submit_button("Remove cap", key="uncap_submit", on_click=_apply, args=(
                lambda: Change("uncap", st.session_state.get("uncap_key")),))

price_left, price_right = st.columns(2)
with price_left:
    unpriced = [m for m in check["model"] if m]
    with st.form("set_price", border=True):
        st.markdown("**Set a price** (USD per million tokens)")
        st.selectbox("Model", unpriced, key="price_model", index=None,
                     accept_new_options=True, placeholder="e.g. ft:gpt-4o-mini:acme:*",
                     help="As `prices check` names it, or a prefix followed by * (every "
                          "fine-tune of a base model). Seen without a price: "
                          + (", ".join(unpriced[:10]) or "none"))
        st.text_input("Provider", key="price_provider", placeholder="any provider",
                      help="openai, anthropic, aws, …: the provider the price is for; any "
                           "when left empty.")
        st.text_input("From", key="price_from", placeholder="YYYY-MM-DD (from the beginning)",
                      help="The day (00:00 UTC) the price holds from: calls that started "
                           "before keep the price they had.")
        st.text_input("Input", key="price_input", placeholder="e.g. 0.30 (0: free)")
        st.text_input("Output", key="price_output", placeholder="e.g. 1.20",
                      help="Reasoning tokens are billed at this rate.")
        st.text_input("Cache read", key="price_cache_read", placeholder="the input price")
        st.text_input("Cache write", key="price_cache_write", placeholder="the input price")

        def _price() -> PriceChange:
            ss = st.session_state

            def rate(key: str, what: str) -> int | None:
                text = str(ss.get(key) or "").strip()
                return parse_rate(text, what) if text else None

            day = str(ss.get("price_from") or "").strip()
            return PriceChange("set", str(ss.get("price_model") or ""),
                               str(ss.get("price_provider") or "").strip(),
                               parse_from(day) if day else None,
                               rate("price_input", "input price"),
                               rate("price_output", "output price"),
                               rate("price_cache_read", "cache read price"),
                               rate("price_cache_write", "cache write price"))

        st.form_submit_button("Set price", key="price_submit", on_click=_apply_price,
                              args=(_price,))
with price_right:
    if overrides:
        entries = list(range(len(overrides)))

        def _entry(i: int) -> str:
            row = overrides[i]
            return (f"{row['model']} · {row['provider'] or ANY_PROVIDER} · from "
                    f"{format_day(row['from_ns']) or 'the beginning'}")

        with st.form("unset_price", border=True):
            st.markdown("**Remove a price**")
            st.selectbox("Price", entries, key="unset_price_entry", format_func=_entry)

            def _unset() -> PriceChange:
                row = overrides[int(st.session_state.get("unset_price_entry") or 0)]
                return PriceChange("unset", str(row["model"]), str(row["provider"] or ""),
                                   row["from_ns"])

            st.form_submit_button("Remove price", key="unset_price_submit",
                                  on_click=_apply_price, args=(_unset,))
