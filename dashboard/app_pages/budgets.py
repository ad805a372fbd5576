"""Budgets: the declared budgets per agent, the default and the per-step caps (SPEC §10), where
each run's budget came from, and, inside `budgetscope serve`, forms that change them."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, fmt, layout
from dashboard.metrics import Metric, headline
from store import Change, DeclarationError, parse_duration_ms

ctx = layout.context()
DEFAULT = "(default: every agent without its own)"
MESSAGE = "_budgets_message"

st.title("Budgets")
st.caption("The usual instrumentations send no `budget.total_ms`. A budget declared for an "
           "agent, or a default for every agent, measures that agent's runs without one "
           "(d = s + B); a run's own `budget.total_ms` always wins. A cap declared for a step "
           "key gives its steps without `budget.allocated_ms` the allocation min(cap, budget "
           "left when the step starts), for step utilisation. A change re-measures past runs "
           "too; on a large file that takes a while, and the tables follow once it is done.")


def _apply(change_of: object) -> None:
    """A form's callback (runs before the page redraws, so the tables show the change)."""
    try:
        change = change_of()  # type: ignore[operator]
        outcome = data.change_declaration(change)
    except DeclarationError as error:
        st.session_state[MESSAGE] = ("error", str(error))
        return
    except Exception as error:  # noqa: BLE001 - the server stopping, the disk full: a message
        st.session_state[MESSAGE] = ("error", f"could not store the change: {error}")
        return
    applied = outcome.applied
    if not applied.changed:
        text = "Nothing changed: that is already what is declared."
    else:
        derived = (f"re-derived in {outcome.seconds:.2f} s" if outcome.derived
                   else "being re-derived (the tables follow once it is done)")
        text = f"Stored. {fmt.plural(applied.runs, 'run')} {derived}."
    st.session_state[MESSAGE] = ("success", text)


runs = data.report("runs", ctx.filters)
sources = runs["budget_source"].fillna("unknown").value_counts() if not runs.empty else \
    pd.Series(dtype="int64")
headline([
    Metric("Runs with their own budget", f"{int(sources.get('span', 0)):,}",
           help="budget_source = span: the run carries budget.total_ms"),
    Metric("Runs measured against a declared budget", f"{int(sources.get('declared', 0)):,}",
           help="budget_source = declared: their agent's budget, else the default"),
    Metric("Runs with no budget", f"{int(sources.get('unknown', 0)):,}",
           help="no budget.total_ms and nothing declared: budget metrics skip them"),
], key="budgets_headline")

notice = st.session_state.pop(MESSAGE, None)
if notice is not None:
    (st.error if notice[0] == "error" else st.success)(fmt.escape_md(notice[1]))

declared = data.declarations()
if declared is None:
    st.info("On the ClickHouse backend the declarations are not shown here.")
    st.stop()
budgets = declared[(declared["what"] == "budget") & declared["duration_ms"].notna()]
caps = declared[declared["what"] == "cap"]

st.subheader("Declared budgets")
if budgets.empty:
    st.caption("None declared.")
else:
    layout.table(pd.DataFrame({
        "agent": [DEFAULT if fmt.missing(t) else t for t in budgets["target"]],
        "budget": [fmt.duration(ms) for ms in budgets["duration_ms"]],
        "budget_ms": budgets["duration_ms"].astype("int64"),
        "declared_at": budgets["declared_at"],
    }), hide_index=True, key="declared_budgets_table")

st.subheader("Declared step caps")
if caps.empty:
    st.caption("None declared.")
else:
    layout.table(pd.DataFrame({
        "step_key": caps["target"],
        "cap": [fmt.duration(ms) for ms in caps["duration_ms"]],
        "cap_ms": caps["duration_ms"].astype("int64"),
        "declared_at": caps["declared_at"],
    }), hide_index=True, key="declared_caps_table")

if data.budget_editor() is None:
    st.info("Read-only here: this dashboard does not own the database. Change declarations "
            "with the command line, which goes to the server when `budgetscope serve` holds "
            "the file, or in the dashboard that `budgetscope serve` runs:")
    st.code(f"budgetscope --db {ctx.status.path} budgets set AGENT 45s\n"
            f"budgetscope --db {ctx.status.path} budgets set --default 60s\n"
            f"budgetscope --db {ctx.status.path} budgets cap tool:fetch_report 9s",
            language="bash")
    st.stop()

st.subheader("Change")
left, right = st.columns(2)
with left:
    with st.form("declare_budget", clear_on_submit=False, border=True):
        st.markdown("**Declare a budget**")
        st.selectbox("Agent", [DEFAULT, *ctx.status.agents], key="declare_agent",
                     accept_new_options=True,
                     help="As reports name it: gen_ai.agent.name, else the service.name. "
                          "Type a name not seen yet to declare it ahead of its runs.")
        st.text_input("Budget", key="declare_budget_text", placeholder="e.g. 45s, 2500ms, 5m")

        def _declare() -> Change:
            agent = st.session_state.get("declare_agent") or DEFAULT
            ms = parse_duration_ms(st.session_state.get("declare_budget_text", ""), "budget")
            return Change("set_default", None, ms) if agent == DEFAULT else \
                Change("set", agent, ms)

        st.form_submit_button("Declare", key="declare_submit", on_click=_apply, args=(_declare,))
    if not budgets.empty:
        with st.form("remove_budget", border=True):
            st.markdown("**Remove a budget**")
            st.selectbox("Declared budget", [DEFAULT if fmt.missing(t) else t
                                             for t in budgets["target"]], key="remove_agent")

            def _remove() -> Change:
                agent = st.session_state.get("remove_agent")
                return Change("unset_default") if agent == DEFAULT else Change("unset", agent)

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
