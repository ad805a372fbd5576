"""The agents, their tools, and what each run plans to do.

A run's plan (which calls, in which order, with which gaps) is drawn up front from the run's own
random stream, before any policy is looked at: a tighter policy can cut a plan short, never
change it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from .latency import Lognormal
from .policy import utc_ns


@dataclass(frozen=True)
class ToolSpec:
    name: str
    transport: str  # "http", "grpc" or "none"
    side_effect: str = "read"
    method: str = "GET"
    server: str = ""
    route: str = ""  # URL path, or "package.Service/Method" for gRPC
    reconcile_with: str | None = None  # the read that tells whether this write landed


TOOLSPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec("fetch_report", "http", server="reports.internal", route="/v1/reports/render"),
        ToolSpec("search_api", "http", server="search.internal", route="/v2/search"),
        ToolSpec("fetch_page", "http", server="web-proxy.internal", route="/fetch"),
        ToolSpec("kb_search", "http", server="kb.internal", route="/api/search"),
        ToolSpec("get_order", "http", server="orders.internal", route="/v1/orders/lookup"),
        ToolSpec("create_ticket", "http", "write", "POST", "tickets.internal", "/api/v2/tickets",
                 reconcile_with="get_ticket"),
        ToolSpec("get_ticket", "http", server="tickets.internal", route="/api/v2/tickets/by-key"),
        ToolSpec("vector_lookup", "grpc", server="vectors.internal",
                 route="retrieval.v1.VectorStore/Query"),
        ToolSpec("get_customer", "grpc", server="crm.internal",
                 route="crm.v1.CustomerService/GetCustomer"),
        ToolSpec("get_invoice", "grpc", server="ledger.internal",
                 route="ledger.v1.Ledger/GetInvoice"),
        ToolSpec("get_payment", "grpc", server="payments.internal",
                 route="payments.v1.Payments/GetPayment"),
        ToolSpec("issue_refund", "grpc", "write", server="payments.internal",
                 route="payments.v1.Refunds/IssueRefund", reconcile_with="lookup_refund"),
        ToolSpec("lookup_refund", "grpc", server="payments.internal",
                 route="payments.v1.Refunds/GetRefund"),
        ToolSpec("handoff_queue", "none"),
        ToolSpec("rate_limiter", "none"),
    )
}


@dataclass(frozen=True)
class Call:
    idx: int  # the step index: keys the call's nature stream and span ids
    kind: str  # "model", "tool" or "queue"
    name: str
    gap_ms: float  # harness time before the call starts (unattributed)
    input_tokens: int = 0
    synthesis: bool = False  # the research agent's final answer, which its router sends on


@dataclass(frozen=True)
class Fanout:
    """Tool calls the model asked for in one turn, run concurrently."""

    idx: int
    gap_ms: float
    calls: tuple[Call, ...]


@dataclass(frozen=True)
class Subagent:
    idx: int
    gap_ms: float
    name: str
    items: tuple[Item, ...]


Item = Call | Fanout | Subagent


class Planner:
    """Builds one run's plan from the run's plan stream, numbering steps as it goes."""

    _GAP = Lognormal(35, 0.9)

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._next = 0

    def _idx(self) -> int:
        self._next += 1
        return self._next

    def _gap(self) -> float:
        return min(self._GAP.draw(self.rng), 2_000.0)

    def model(self, name: str, input_tokens: int, synthesis: bool = False) -> Call:
        return Call(self._idx(), "model", name, self._gap(), input_tokens, synthesis)

    def tool(self, name: str) -> Call:
        return Call(self._idx(), "tool", name, self._gap())

    def queue(self, name: str) -> Call:
        return Call(self._idx(), "queue", name, self._gap())

    def fanout(self, names: list[str]) -> Fanout:
        idx, gap = self._idx(), self._gap()
        return Fanout(idx, gap, tuple(Call(self._idx(), "tool", n, 0.0) for n in names))

    def subagent(self, name: str, build: Callable[[Planner], list[Item]]) -> Subagent:
        idx, gap = self._idx(), self._gap()
        return Subagent(idx, gap, name, tuple(build(self)))

    def pick(self, weighted: list[tuple[float, str]]) -> str:
        u = self.rng.random() * sum(w for w, _ in weighted)
        for weight, name in weighted:
            u -= weight
            if u < 0:
                return name
        return weighted[-1][1]


def _summarizer(p: Planner) -> list[Item]:
    items: list[Item] = [p.model("gpt-4o-mini", 2_500), p.tool("fetch_page"),
                         p.model("gpt-4o-mini", 4_000)]
    if p.rng.random() < 0.5:
        items.append(p.tool("vector_lookup"))
    items.append(p.model("gpt-4o-mini", 5_000))
    return items


def plan_research(p: Planner) -> list[Item]:
    rng = p.rng
    items: list[Item] = []
    if rng.random() < 0.2:
        items.append(p.queue("rate_limiter"))
    context = rng.randint(900, 2_000)
    items.append(p.model("gpt-4o", context))
    for _ in range(rng.randint(4, 8)):
        context += rng.randint(400, 1_600)
        items.append(p.model("gpt-4o", context))
        action = p.pick([(0.30, "search"), (0.25, "fanout"), (0.30, "report"), (0.15, "vector")])
        if action == "search":
            items.append(p.tool("search_api"))
        elif action == "fanout":
            names = ["fetch_page", "search_api"]
            items.append(p.fanout([rng.choice(names) for _ in range(rng.randint(2, 4))]))
        elif action == "report":
            items.append(p.tool("fetch_report"))
        else:
            items.append(p.tool("vector_lookup"))
    if rng.random() < 0.6:
        items.append(p.subagent("summarizer", _summarizer))
    items.append(p.model("gpt-4o", context + 1_500, synthesis=True))
    return items


def plan_support(p: Planner) -> list[Item]:
    rng = p.rng
    items: list[Item] = [p.model("gpt-4o-mini", rng.randint(600, 1_200)), p.tool("get_customer")]
    if rng.random() < 0.4:
        items.append(p.fanout(["kb_search"] * rng.randint(2, 3)))
    else:
        items.append(p.tool("kb_search"))
    context = rng.randint(2_000, 3_500)
    items.append(p.model("gpt-4o", context))
    for _ in range(rng.randint(3, 6)):
        context += rng.randint(200, 800)
        items.append(p.model("gpt-4o-mini", context))
        action = p.pick([(0.4, "kb_search"), (0.3, "get_order"), (0.15, "get_customer"),
                         (0.15, "fanout")])
        if action == "fanout":
            items.append(p.fanout(["get_order", "kb_search"]))
        else:
            items.append(p.tool(action))
    if rng.random() < 0.8:
        if rng.random() < 0.6:
            items.append(p.queue("handoff_queue"))
        items.append(p.tool("create_ticket"))
    items.append(p.model("gpt-4o", context + 600))
    return items


def plan_billing(p: Planner) -> list[Item]:
    rng = p.rng
    items: list[Item] = [p.model("gpt-4o-mini", rng.randint(700, 1_300)), p.tool("get_invoice"),
                         p.tool("fetch_report")]
    context = rng.randint(1_500, 2_500)
    items.append(p.model("gpt-4o-mini", context))
    for _ in range(rng.randint(3, 6)):
        context += rng.randint(200, 700)
        items.append(p.model("gpt-4o-mini", context))
        action = p.pick([(0.35, "get_invoice"), (0.3, "get_payment"), (0.15, "fetch_report"),
                         (0.2, "fanout")])
        if action == "fanout":
            items.append(p.fanout(["get_invoice", "get_payment"]))
        else:
            items.append(p.tool(action))
    if rng.random() < 0.65:
        items.append(p.tool("issue_refund"))
    items.append(p.model("gpt-4o-mini", context + 400))
    return items


def plan_triage(p: Planner) -> list[Item]:
    rng = p.rng
    context = rng.randint(500, 1_000)
    items: list[Item] = [p.model("gpt-4o-mini", context)]
    for _ in range(rng.randint(4, 6)):
        context += rng.randint(300, 900)
        items.append(p.model("gpt-4o-mini", context))
        action = p.pick([(0.35, "search_api"), (0.35, "vector_lookup"), (0.15, "fetch_page"),
                         (0.15, "fanout")])
        if action == "fanout":
            items.append(p.fanout(["search_api", "vector_lookup"]))
        else:
            items.append(p.tool(action))
    items.append(p.model("gpt-4o-mini", context + 300))
    return items


@dataclass(frozen=True)
class AgentSpec:
    name: str
    service: str
    weight: float
    planner: Callable[[Planner], list[Item]]
    main_model: str
    versions: tuple[tuple[int, str], ...]  # (from_ns, service.version), ascending
    instrumented: bool = True  # False: plain OpenTelemetry attributes only, no budget.* on steps
    instances: int = 2
    explicit_deadline_p: float = 0.0  # runs that set budget.deadline_unix_ms themselves
    arrival_queue: Lognormal | None = None  # request waited before the run started
    no_budget_p: float = 0.0
    nested_retry_tools: frozenset[str] = field(default_factory=frozenset)
    # From this version on, reconciliation reads carry a span link instead of the key.
    link_reconcile_from: str | None = None


_NOV_09 = utc_ns(2026, 11, 9)
_NOV_12 = utc_ns(2026, 11, 12, 10)
_NOV_19 = utc_ns(2026, 11, 19, 9)

AGENTS: tuple[AgentSpec, ...] = (
    AgentSpec("research-agent", "research-agent", 0.30, plan_research, "gpt-4o",
              ((0, "3.2.0"), (_NOV_12, "3.3.0")),
              nested_retry_tools=frozenset({"search_api"})),
    AgentSpec("support-agent", "support-agent", 0.34, plan_support, "gpt-4o",
              ((0, "2.3.1"), (_NOV_19, "2.4.0")), explicit_deadline_p=1.0,
              arrival_queue=Lognormal(400, 0.8), link_reconcile_from="2.4.0"),
    # The billing agent runs inside the payments worker: service.name differs from the agent.
    AgentSpec("billing-agent", "billing-worker", 0.24, plan_billing, "gpt-4o-mini",
              ((0, "1.8.4"), (_NOV_09, "1.9.0")), explicit_deadline_p=0.5,
              link_reconcile_from="1.9.0"),
    AgentSpec("triage-agent", "triage-bot", 0.12, plan_triage, "gpt-4o-mini",
              ((0, "0.7.2"),), instrumented=False, instances=1, no_budget_p=0.15),
)


def pick_agent(rng: random.Random) -> AgentSpec:
    u = rng.random() * sum(a.weight for a in AGENTS)
    for agent in AGENTS:
        u -= agent.weight
        if u < 0:
            return agent
    return AGENTS[-1]


def version_at(agent: AgentSpec, t_ns: int) -> str:
    current = agent.versions[0][1]
    for since, version in agent.versions:
        if t_ns >= since:
            current = version
    return current
