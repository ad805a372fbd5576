"""Weekly report: the SPEC §7 table, and its CSV, byte for byte what `budgetscope report weekly`
writes for the same filters (both call queries.render.to_csv_bytes on queries.reports.weekly)."""

from __future__ import annotations

import streamlit as st

from dashboard import data, fmt, layout
from dashboard.exports import cli_command, csv_file_name
from dashboard.filters import FULL_WEEKS
from queries.render import to_csv_bytes

ctx = layout.context()
st.title("Weekly report")
st.caption("One row per ISO week (UTC, weeks start Monday) × agent, for runs that started in "
           + fmt.escape_md(ctx.state.label(ctx.now))
           + ". Rates are fractions in [0, 1]; empty cells where a value is undefined.")

weekly = data.report("weekly", ctx.filters)
st.download_button("Download CSV", data=to_csv_bytes(weekly),
                   file_name=csv_file_name("weekly", ctx.filters), mime="text/csv",
                   icon=":material/download:", key="weekly_csv", on_click="ignore")
st.caption("The same bytes from the command line:")
st.code(cli_command("weekly", ctx.filters, ctx.status.path), language="bash", wrap_lines=True)

def _show_full_weeks() -> None:
    st.session_state["f_range"] = "4w"


partial = weekly.loc[weekly["partial_week"].fillna(False).astype(bool), "week"].unique()
if len(partial):
    st.info("Partial weeks (`partial_week` true): " + ", ".join(sorted(partial))
            + ". The time range or the present cuts them short, so their counts are not the "
            "whole week's.")
    if ctx.state.preset not in FULL_WEEKS:
        st.button("Show the last 4 full weeks", on_click=_show_full_weeks,
                  key="weekly_full_weeks")

if weekly.empty:
    st.info("No runs in this range.")
else:
    rates = ["exhaustion_rate", "utilisation_p50", "utilisation_p90", "utilisation_p99",
             "reconciliation_rate", "top_culprit_share"]
    st.dataframe(weekly, hide_index=True, key="weekly_table",
                 height=layout.table_height(len(weekly), most=60),
                 column_config={c: st.column_config.NumberColumn(c, format="%.3f")
                                for c in rates})
