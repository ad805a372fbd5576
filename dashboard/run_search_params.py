"""The Runs page's search in the URL: a chart anywhere links to the runs behind a bar or a cell
(`runs?culprit=tool:fetch_report`, `runs?class=client_timeout&step=tool:search`,
`runs?umin=90&umax=100`, `runs?usd_exhausted=yes&sort=cost_usd`), and a search typed on the
page is a link to paste.

Pure: parsing and writing query parameters, no widgets. Utilisation bounds are in percent in
the URL (what the page shows), fractions in the RunSearch; cost bounds in dollars in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from queries.run_search import SORTABLE, WRITES, RunSearch, SearchError
from store import vocabulary

KEYS = ("outcome", "exhausted", "culprit", "holder", "step", "class", "writes", "umin", "umax",
        "id", "usd_exhausted", "tokens_exhausted", "cost", "cmin", "cmax", "sort", "order",
        "page")
# `cost=`: runs whose cost is complete, or a lower bound (docs/metrics.md §11.4)
COST_COMPLETE = {"complete": True, "incomplete": False}
OUTCOMES = (*vocabulary.RUN_OUTCOMES, "none")  # "none": runs that stated no outcome
PAGE_SIZE = 50


def _percent(text: str | None, key: str, problems: list[str]) -> float | None:
    if not text:
        return None
    try:
        return float(text) / 100
    except ValueError:
        problems.append(f"{key}={text!r} is not a percentage; ignored")
        return None


def _dollars(text: str | None, key: str, problems: list[str]) -> Decimal | None:
    if not text:
        return None
    try:
        value = Decimal(text.strip().lstrip("$"))
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite() or value < 0:
        problems.append(f"{key}={text!r} is not an amount of dollars; ignored")
        return None
    return value


def _yes_no(params: Mapping[str, str], key: str) -> bool | None:
    return {"yes": True, "no": False}.get(params.get(key) or "")


def from_params(params: Mapping[str, str]) -> tuple[RunSearch, int, list[str]]:
    """(the search, the page number from 1, problems with the link)."""
    problems: list[str] = []
    outcomes = tuple(o for o in (params.get("outcome") or "").split(",") if o)
    unknown = [o for o in outcomes if o not in OUTCOMES]
    if unknown:
        problems.append(f"unknown outcome {', '.join(unknown)}; ignored")
        outcomes = tuple(o for o in outcomes if o in OUTCOMES)
    exhausted = _yes_no(params, "exhausted")
    cost = params.get("cost") or None
    if cost is not None and cost not in COST_COMPLETE:
        problems.append(f"unknown cost {cost!r}; ignored (complete or incomplete)")
        cost = None
    writes = params.get("writes") or None
    if writes is not None and writes not in WRITES:
        problems.append(f"unknown writes {writes!r}; ignored (one of {', '.join(WRITES)})")
        writes = None
    sort = params.get("sort") or "start"
    if sort not in SORTABLE:
        problems.append(f"cannot sort by {sort!r}; sorted by start")
        sort = "start"
    order = params.get("order")
    descending = None if order not in ("asc", "desc") else order == "desc"
    try:
        page = max(1, int(params.get("page") or 1))
    except ValueError:
        page = 1
    try:
        search = RunSearch(outcomes=outcomes, exhausted=exhausted,
                           culprit=params.get("culprit") or None,
                           holder=params.get("holder") or None,
                           step_key=params.get("step") or None,
                           step_class=params.get("class") or None, writes=writes,
                           utilisation_min=_percent(params.get("umin"), "umin", problems),
                           utilisation_max=_percent(params.get("umax"), "umax", problems),
                           id_prefix=params.get("id") or None,
                           usd_exhausted=_yes_no(params, "usd_exhausted"),
                           tokens_exhausted=_yes_no(params, "tokens_exhausted"),
                           cost_complete=None if cost is None else COST_COMPLETE[cost],
                           cost_min=_dollars(params.get("cmin"), "cmin", problems),
                           cost_max=_dollars(params.get("cmax"), "cmax", problems),
                           sort=sort, descending=descending)
    except SearchError as error:
        problems.append(str(error))
        search = RunSearch()
    return search, page, problems


def to_params(search: RunSearch, page: int = 1) -> dict[str, str]:
    params: dict[str, str] = {}
    if search.outcomes:
        params["outcome"] = ",".join(search.outcomes)
    if search.exhausted is not None:
        params["exhausted"] = "yes" if search.exhausted else "no"
    for key, value in (("culprit", search.culprit), ("holder", search.holder),
                       ("step", search.step_key),
                       ("class", search.step_class), ("writes", search.writes),
                       ("id", search.id_prefix)):
        if value:
            params[key] = value
    for key, value in (("umin", search.utilisation_min), ("umax", search.utilisation_max)):
        if value is not None:
            params[key] = f"{value * 100:g}"
    for key, flag in (("usd_exhausted", search.usd_exhausted),
                      ("tokens_exhausted", search.tokens_exhausted)):
        if flag is not None:
            params[key] = "yes" if flag else "no"
    if search.cost_complete is not None:
        params["cost"] = "complete" if search.cost_complete else "incomplete"
    for key, amount in (("cmin", search.cost_min), ("cmax", search.cost_max)):
        if amount is not None:
            params[key] = format(amount.normalize(), "f")
    if search.sort != "start":
        params["sort"] = search.sort
    if search.descending is not None:
        params["order"] = "desc" if search.descending else "asc"
    if page > 1:
        params["page"] = str(page)
    return params
