"""docs/conventions.md and docs/metrics.md §3 as data: which spans are steps, of what kind and name,
and how a step's class is read, for every convention docs/conventions.md names. Both derivations are
generated from this module: store/derive/sql/derive_refresh.sql (DuckDB) and
store/clickhouse/sql/derive_build.sql carry markers such as `/*@step_row*/` that `render` replaces
with SQL built from the tables below.

Adding a framework is an entry in STEP_RULES (in the table's order: the first matching row wins),
its attributes typed at ingest (store/rows/typed_attributes.py; tests/store/test_conventions.py
checks that every attribute named here is), and a test.

The rendered SQL holds only constants written here (attribute values the docs list, class names),
checked against an allow-list of characters; nothing that comes from a span is ever formatted
into it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from store.derive import usage_reads
from store.rows import usage, vocabulary
from store.rows.typed_attributes import TYPED_ATTRIBUTES, as_label

CLIENT_SPAN_KIND = 3  # OTLP SpanKind CLIENT
STATUS_OK, STATUS_ERROR = 1, 2
FROM_BUDGET_KIND = "<budget.step.kind>"  # row 1: the kind is the attribute's own value


@dataclass(frozen=True)
class Match:
    """`attribute` present; or equal to one of `values`; or ending in one of `suffixes`; and never
    one of `excluded`. Values are compared as docs/conventions.md writes them: case-insensitively
    when the attribute is typed as a label, exactly when it is typed as text (a name such as ADK's
    "(merged tools)")."""

    attribute: str
    values: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()


@dataclass(frozen=True)
class Joined:
    """A name made of two parts: the first present of `first`, `separator`, then the first
    present of `then`; without `then` the name is `first` alone when `then_optional`, else
    there is no name from this source."""

    first: tuple[str, ...]
    separator: str
    then: tuple[str, ...]
    then_optional: bool


# docs/conventions.md row 3's last resort: the last word of the span name (`tools/call
# fetch_report`).
SPAN_NAME_LAST_WORD = "<last word of the span name>"
NameSource = str | Joined


@dataclass(frozen=True)
class StepRule:
    row: str  # docs/conventions.md's row number; a row with alternatives of conventions is split
    convention: str  # what the step was recognised from, shown per step (run view, CLI)
    any_of: tuple[Match, ...]
    kind: str
    names: tuple[NameSource, ...]  # default name sources in order (budget.step.name first)
    client_span: bool = False  # only on a CLIENT span
    and_any_of: tuple[Match, ...] = ()  # also one of these (row 10: a name attribute)
    unless: tuple[Match, ...] = ()  # never when one of these matches (bookkeeping, row 9)
    without_step_ancestor: bool = False  # row 12: only with no step above it in the run
    agent: bool = False  # row 10: transparent when alone with steps below (docs/conventions.md)
    # row 11: a wrapper when a step of rows 1-10 lies below it (the walk finds out)
    wrapper_over_steps: bool = False


GEN_AI_OP = "gen_ai.operation.name"
OPENINFERENCE = "openinference.span.kind"
TRACELOOP = "traceloop.span.kind"
VERCEL_OP = "ai.operationId"
AGENT_NAMES = ("gen_ai.agent.name", "agent.name", "traceloop.entity.name", "graph.node.id")
MODEL_OPERATIONS = ("chat", "text_completion", "generate_content", "embeddings")  # row 2
TOOL_OPERATIONS = ("execute_tool", "retrieval")  # row 3
AGENT_OPERATIONS = ("invoke_agent",)  # row 10
# Building an agent is never a step, whatever the span's kind (docs/conventions.md row 11).
NEVER_STEP_OPERATIONS = ("create_agent",)
# Framework bookkeeping that looks like a step: Google ADK's record of a batch of parallel
# tool calls, each of which has an execute_tool span of its own.
BOOKKEEPING_TOOL_NAMES = ("(merged tools)",)
TOOL_NAMES = ("gen_ai.tool.name", "gen_ai.data_source.id", SPAN_NAME_LAST_WORD)
PEER_HOSTS = ("server.address", "net.peer.name", "url.full", "http.url")
PEER_ROUTES = ("url.template", "http.route")
CALL_NAMES = (Joined(("rpc.service",), "/", ("rpc.method",), then_optional=False),
              Joined(PEER_HOSTS, " ", PEER_ROUTES, then_optional=True))

STEP_RULES: tuple[StepRule, ...] = (
    StepRule("1", "budget", (Match("budget.step.kind"),), FROM_BUDGET_KIND,
             ("budget.step.name",)),
    StepRule("2", "otel_genai", (Match(GEN_AI_OP, MODEL_OPERATIONS),),
             "model", ("gen_ai.request.model", "gen_ai.response.model")),
    StepRule("3", "otel_genai", (Match(GEN_AI_OP, TOOL_OPERATIONS),), "tool", TOOL_NAMES,
             unless=(Match("gen_ai.tool.name", BOOKKEEPING_TOOL_NAMES),)),
    StepRule("3b", "mcp", (Match("mcp.method.name", ("tools/call",)),), "tool", TOOL_NAMES,
             client_span=True),
    StepRule("4", "openinference", (Match(OPENINFERENCE, ("LLM", "EMBEDDING", "RERANKER")),),
             "model", ("llm.model_name", "embedding.model_name", "reranker.model_name",
                       "llm.invocation_parameters")),
    StepRule("5", "openinference", (Match(OPENINFERENCE, ("TOOL", "RETRIEVER")),), "tool",
             ("tool.name",)),
    StepRule("6a", "openllmetry", (Match(TRACELOOP, ("tool",)),), "tool",
             ("traceloop.entity.name",)),
    StepRule("6b", "openllmetry", (Match("llm.request.type"),), "model",
             ("gen_ai.request.model",)),
    StepRule("7", "vercel_ai", (Match(VERCEL_OP, ("ai.toolCall",)),), "tool",
             ("ai.toolCall.name",)),
    StepRule("8", "vercel_ai", (Match(VERCEL_OP, suffixes=(".doGenerate", ".doStream",
                                                         ".doEmbed")),),
             "model", ("ai.model.id",)),
    # an agent span carrying gen_ai.system is no model call: only without an operation, or
    # with a model operation
    StepRule("9", "otel_genai", (Match("gen_ai.request.model"), Match("gen_ai.provider.name"),
                                 Match("gen_ai.system")),
             "model", ("gen_ai.request.model",), client_span=True,
             unless=(Match(GEN_AI_OP, excluded=MODEL_OPERATIONS),)),
    # an agent span without a name attribute (OpenInference's "Agent workflow", LangGraph's
    # per-turn `agent` node) is a wrapper
    StepRule("10a", "otel_genai", (Match(GEN_AI_OP, AGENT_OPERATIONS),), "subagent",
             AGENT_NAMES, and_any_of=tuple(Match(name) for name in AGENT_NAMES), agent=True),
    StepRule("10b", "openinference", (Match(OPENINFERENCE, ("AGENT",)),), "subagent",
             AGENT_NAMES, and_any_of=tuple(Match(name) for name in AGENT_NAMES), agent=True),
    StepRule("10c", "openllmetry", (Match(TRACELOOP, ("agent",)),), "subagent", AGENT_NAMES,
             and_any_of=tuple(Match(name) for name in AGENT_NAMES), agent=True),
    # any other operation, on a call that leaves the process; in-process operations (Strands'
    # execute_event_loop_cycle, workflows, planners) are wrappers, and so is one with a step
    # below it (wrapper_over_steps)
    StepRule("11", "otel_genai",
             (Match(GEN_AI_OP, excluded=MODEL_OPERATIONS + TOOL_OPERATIONS + AGENT_OPERATIONS
                    + NEVER_STEP_OPERATIONS),),
             "other", (), client_span=True, wrapper_over_steps=True),
    StepRule("12a", "rpc", (Match("rpc.system"),), "other", CALL_NAMES, client_span=True,
             without_step_ancestor=True),
    StepRule("12b", "http", (Match("http.request.method"), Match("http.method")), "other",
             CALL_NAMES, client_span=True, without_step_ancestor=True),
)
# docs/conventions.md, "An event record is not a call": the rows whose span is *unnamed* when it
# carries no budget.step.name and its row's last column gives it no name (named by its span name),
# and is then a wrapper below a span of its kind. Rows 2-9: every model and tool row but the
# budget's.
NAMED_ROWS = tuple(rule.row for rule in STEP_RULES
                   if rule.kind in ("model", "tool") and rule.row != "1")
# docs/conventions.md, "HTTP client spans beside their call" and "… in a trace of their own": the
# kinds of step that hold a client span hung beside them, or one in a trace of its own.
HOLDER_KINDS = ("model", "tool")
# docs/conventions.md, "HTTP client spans in a trace of their own": a root span of row 12 that
# carries one of these (an HTTP client's call, not a gRPC one) may be a stray call of another
# trace's step.
STRAY_CALL_ATTRIBUTES = ("http.request.method", "http.method")
# docs/conventions.md, "A callable's method is not its name": a step name with this ending drops it.
CALLABLE_METHOD_SUFFIX = ".__call__"
# docs/conventions.md, "A preparation span is not a call": what a model span carries once a model
# answered it, by attribute key prefix (usage, the response, what it cost): OpenTelemetry GenAI,
# OpenInference, OpenLLMetry, the Vercel AI SDK, budget.cost_usd. A model span without any of them,
# not a CLIENT span, with no outcome evidence and no error, shows no sign of a call (an input record
# such as output.value says nothing: a preparation returns the request).
_ANSWER_PREFIXES = ("gen_ai.usage.", "gen_ai.response.", "gen_ai.output.", "gen_ai.completion",
                    "llm.token_count.", "llm.output_messages", "llm.finish_reason", "llm.usage.",
                    "ai.usage.", "ai.response.", "budget.cost_usd")
# ... and every usage or reported-cost attribute that docs/metrics.md §11.1 and §11.3 read
# (store/rows/usage.py), those no prefix above covers (llm.cost.total, operation.cost): a span
# the cost derivation would meter is a call.
ANSWER_ATTRIBUTE_PREFIXES = _ANSWER_PREFIXES + tuple(sorted(
    {attribute
     for attributes in (*usage.USAGE_SPELLINGS.values(), *usage.COST_CANDIDATES)
     for attribute in attributes
     if not attribute.startswith(_ANSWER_PREFIXES)}))
# The rows before row 11: a step of one of them below a row-11 span makes that span a wrapper.
ROWS_BEFORE_11 = tuple(rule.row for rule in STEP_RULES[:STEP_RULES.index(
    next(rule for rule in STEP_RULES if rule.wrapper_over_steps))])

# ---- docs/metrics.md §3: classes --------------------------------------------------------

OUTCOMES = vocabulary.CLASSES  # the values budget.outcome may state (rule 1)
FALLBACK_CLASS = "error"
# (class, inclusive code ranges), first match wins; 1xx-3xx give nothing (rule 2).
HTTP_CLASSES: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = (
    ("upstream_error", ((500, 599), (429, 429), (408, 408))),
    ("client_error", ((400, 499),)),
)
# gRPC status numbers (ingest types the names, DEADLINE_EXCEEDED → 4); 0 gives nothing (rule 3).
GRPC_CLASSES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("client_timeout", (4,)),
    ("cancelled", (1,)),
    ("upstream_error", (14, 13, 2, 8, 10, 15)),
    ("client_error", (3, 5, 6, 7, 9, 11, 12, 16)),
)


@dataclass(frozen=True)
class TextRule:
    """Rule 4 on one normalised text: a class when it contains one of `contains` or its code
    lies in one of `codes`."""

    result: str
    contains: tuple[str, ...] = ()
    codes: tuple[tuple[int, int], ...] = ()


TEXT_CLASSES: tuple[TextRule, ...] = (
    TextRule("upstream_error", ("gatewaytimeout",)),
    TextRule("client_timeout", ("timeout", "timedout", "deadline")),
    TextRule("cancelled", ("cancel",)),
    TextRule("upstream_error", ("connection", "unavailable", "refused", "reset", "ratelimit",
                                "toomanyrequests", "internalserver", "overloaded",
                                "badgateway"), ((500, 599), (429, 429))),
    TextRule("client_error", ("notfound", "badrequest", "authentication", "permissiondenied",
                              "unprocessable"), ((400, 499),)),
)
# A text's code: the text when it is only digits, else the three digits right after one of these.
CODE_PREFIXES = ("code", "status")
# The OpenAI Agents SDK's result for a tool that timed out (reported as a successful call).
TOOL_TIMEOUT_RESULT = r"^Tool '.+' timed out"
RESULT_ATTRIBUTES = ("output.value", "gen_ai.tool.call.result")
# Rule 6: the classes a step without evidence of its own takes from a descendant.
ROLL_UP_CLASSES = ("client_timeout", "upstream_error", "cancelled", "client_error")

# ---- docs/metrics.md §11: tokens, cost and prices ----------------------------------------

# Rule 1b: a gateway's budget refusal (LiteLLM's BudgetExceededError, error type
# budget_exceeded) is ours, whatever its HTTP status: read in error.type, the exception types
# and messages, normalised as rule 4 normalises them.
BUDGET_REFUSAL = TextRule("refused", ("budgetexceeded",))
REFUSED_BY_BUDGET_REFUSAL = "usd"
# docs/metrics.md §2: the budgets a refusal or an exhausted run names (default: time).
BUDGET_DIMENSIONS = vocabulary.BUDGET_DIMENSIONS
# §11.4: the classes of an unmetered model step that may still have been billed (a stream
# cut by our deadline is billed for what it generated); the others are presumed unbilled.
BILLABLE_CLASSES = ("ok", "client_timeout", "cancelled", "error")
# §11.1-§11.3 as ingest types them (store/rows/usage.py): each quantity's spellings in order,
# and the reported-cost candidates; both derivations read the columns they are merged into.
USAGE_SPELLINGS = usage.USAGE_SPELLINGS
COST_CANDIDATES = usage.COST_CANDIDATES
# What a span carries (§11.2): a valid usage value or a reported cost.
CARRIER_COLUMNS = (*usage.USAGE_SPELLINGS, "cost_reported_nano")
# §11.3 step 2: the model and provider a span is priced for, first present of each.
PRICING_MODELS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name",
                  "ai.response.model", "ai.model.id")
PRICING_PROVIDERS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider")
# ... of which these values name the instrumentation, not who bills: Strands Agents writes
# `strands-agents` in gen_ai.system (gen_ai.provider.name under the latest conventions) on
# every span, whatever model it calls. Read as absent, so the next attribute (or a
# `provider/model` name's prefix) says, else the model is matched by its name alone.
NOT_PROVIDERS = ("strands-agents",)
# ... else the first dot-separated word of this one (the Vercel AI SDK's `openai.chat`)
PRICING_PROVIDER_FIRST_WORD = "ai.model.provider"
# OpenTelemetry's provider ids → the price table's: (id, or a prefix ending in '.', table id).
PROVIDER_IDS: tuple[tuple[str, str], ...] = (
    ("aws.bedrock", "aws"), ("gcp.", "google"), ("azure.ai.", "azure"), ("x_ai", "x-ai"),
    ("mistral_ai", "mistral"))
# Money: nano-dollars; a rate is pico-dollars per million tokens, so a cost in nano-dollars is
# Σ count × rate / 10^9, rounded half to even once (docs/storage.md).
RATE_DIVISOR = 10**9

# ---- rendering --------------------------------------------------------------------------

# The characters a constant of this module may hold: constants are rendered into the
# derivation's SQL as text (never bound), so one outside these is refused, not quoted.
SAFE_CONSTANT = re.compile(r"^[A-Za-z0-9_.:/ %<>()-]*$")


def sql_constant(value: str) -> str:
    """`value` as a SQL string literal; ValueError when it holds a character outside
    SAFE_CONSTANT."""
    if not SAFE_CONSTANT.match(value):
        raise ValueError(f"convention constant {value!r} is outside the allow-list")
    return f"'{value}'"


_literal = sql_constant  # the short name the renderers below call it by


def _pattern(value: str) -> str:
    """A regular expression of this module as a SQL string (single quotes doubled)."""
    if "\\" in value or "--" in value:
        raise ValueError(f"pattern {value!r} would need escaping")
    return "'" + value.replace("'", "''") + "'"


def column(attribute: str) -> str:
    """The typed column of an attribute (store/rows/typed_attributes.py)."""
    if attribute not in TYPED_ATTRIBUTES:
        raise KeyError(f"{attribute} is not typed at ingest (store/rows/typed_attributes.py)")
    name = TYPED_ATTRIBUTES[attribute][0]
    if name.startswith("_"):
        raise KeyError(f"{attribute} is merged into another column")
    return name


def _values(attribute: str, values: tuple[str, ...]) -> str:
    """The values a rule lists, as the column holds them: lower-cased for a label, else as is."""
    if TYPED_ATTRIBUTES[attribute][1] is as_label:
        values = tuple(as_label(value) or "" for value in values)
    return ", ".join(_literal(value) for value in values)


def _match_sql(match: Match) -> str:
    col = column(match.attribute)
    if match.suffixes and TYPED_ATTRIBUTES[match.attribute][1] is not as_label:
        raise ValueError(f"{match.attribute} is compared by suffix: type it with as_label")
    if match.values:
        return f"{col} IN ({_values(match.attribute, match.values)})"
    if match.suffixes:
        return "(" + " OR ".join(f"{col} LIKE {_literal('%' + (as_label(s) or ''))}"
                                 for s in match.suffixes) + ")"
    if match.excluded:
        return f"({col} IS NOT NULL AND {col} NOT IN ({_values(match.attribute, match.excluded)}))"
    return f"{col} IS NOT NULL"


def _any_sql(matches: tuple[Match, ...]) -> str:
    return "(" + " OR ".join(_match_sql(match) for match in matches) + ")"


def _rule_sql(rule: StepRule) -> str:
    condition = _any_sql(rule.any_of)
    if rule.and_any_of:
        condition += f" AND {_any_sql(rule.and_any_of)}"
    if rule.unless:
        # a NULL test is false here: an absent attribute never excludes
        condition += f" AND NOT coalesce({_any_sql(rule.unless)}, false)"
    if rule.client_span:
        condition = f"kind = {CLIENT_SPAN_KIND} AND {condition}"
    return condition


def _present(attribute: str) -> str:
    return f"nullif({column(attribute)}, '')"


def _first_present(attributes: tuple[str, ...]) -> str:
    parts = [_present(a) for a in attributes]
    return parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


# The last run of non-space characters, as the row 3 name of last resort.
_LAST_WORD = "([^[:space:]]+)[[:space:]]*$"


def _name_sql(source: NameSource, dialect: Dialect) -> str:
    if source == SPAN_NAME_LAST_WORD:
        return f"nullif({dialect.extract_group('name', _pattern(_LAST_WORD))}, '')"
    if isinstance(source, str):
        return _present(source)
    first, then = _first_present(source.first), _first_present(source.then)
    sep = _literal(source.separator)
    if source.then_optional:
        return f"CASE WHEN {first} IS NOT NULL THEN {first} || coalesce({sep} || {then}, '') END"
    return f"CASE WHEN {first} IS NOT NULL AND {then} IS NOT NULL " \
           f"THEN {first} || {sep} || {then} END"


def step_row_sql() -> str:
    """The first STEP_RULES row a span matches (docs/conventions.md), or NULL."""
    whens = "\n".join(f"        WHEN {_rule_sql(rule)} THEN {_literal(rule.row)}"
                      for rule in STEP_RULES)
    return f"CASE\n{whens}\n    END"


def _by_row(value: Callable[[StepRule], str | None], default: str = "NULL") -> str:
    """The value of the span's row. Rows of one value share one test (`step_row IN (...)`):
    one WHEN a row cost DuckDB ~2 ms more per 40,960 GenAI spans across step_kind, step_name
    and convention, most spans being tested against every row."""
    rows_of: dict[str, list[str]] = {}
    for rule in STEP_RULES:
        if (text := value(rule)) is not None:
            rows_of.setdefault(text, []).append(_literal(rule.row))
    whens = [f"WHEN step_row IN ({', '.join(rows)}) THEN {text}"
             for text, rows in rows_of.items()]
    return "CASE " + " ".join(whens) + f" ELSE {default} END"


def step_kind_sql() -> str:
    return _by_row(lambda r: column("budget.step.kind") if r.kind == FROM_BUDGET_KIND
                   else _literal(r.kind))


def default_name_sql(dialect: Dialect) -> str:
    """The matched row's default name from the span's attributes (NULL: none of them), the
    row's sources read from the span name (row 3's last word) left out."""
    def names(rule: StepRule) -> str | None:
        parts = [_name_sql(source, dialect) for source in rule.names
                 if source != SPAN_NAME_LAST_WORD]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"
    return _by_row(names)


def _span_name_sources_sql(dialect: Dialect) -> str:
    """The row's default names read from the span name (row 3's last word), or NULL."""
    return _by_row(lambda r: _name_sql(SPAN_NAME_LAST_WORD, dialect)
                   if SPAN_NAME_LAST_WORD in r.names else None)


def raw_step_name_sql(dialect: Dialect) -> str:
    """budget.step.name first, then the matched row's default name (the column `row_name`,
    default_name_sql), then the span name."""
    return f"coalesce({_present('budget.step.name')}, row_name, " \
           f"{_span_name_sources_sql(dialect)}, name)"


def step_name_sql(dialect: Dialect) -> str:
    """The column `raw_step_name` without a callable's `.__call__` (docs/conventions.md)."""
    return dialect.drop_suffix("raw_step_name", CALLABLE_METHOD_SUFFIX)


def unnamed_sql() -> str:
    """docs/conventions.md, "An event record is not a call": a span of rows 2-9 with no
    budget.step.name and no name from its row's attributes (it is named by its span name). Reads
    `row_name`."""
    rows = ", ".join(map(_literal, NAMED_ROWS))
    return f"coalesce(step_row IN ({rows}), false) AND {_present('budget.step.name')} IS NULL " \
           "AND row_name IS NULL"


def model_sign_sql(dialect: Dialect) -> str:
    """docs/conventions.md, "A preparation span is not a call": NULL for a span that is no model
    span of the table; true when it shows a sign of a call of its own (a CLIENT span, outcome
    evidence or an error, an answer's attributes); false when it shows none (what is below it is the
    derivation's to look at). The attribute keys are read only for the few model spans that the
    cheaper tests leave. Reads step_kind, specific, has_error_type and the typed columns."""
    evidence = " OR ".join((f"kind = {CLIENT_SPAN_KIND}", "specific IS NOT NULL",
                            "has_error_type", f"status_code = {STATUS_ERROR}",
                            "budget_outcome IS NOT NULL",
                            "http_response_status_code IS NOT NULL",
                            "grpc_status_code IS NOT NULL"))
    return f"CASE WHEN coalesce(step_kind, '') <> 'model' THEN NULL WHEN {evidence} THEN true " \
           f"ELSE {dialect.any_key_prefix(ANSWER_ATTRIBUTE_PREFIXES)} END"


def holder_kinds_sql() -> str:
    return ", ".join(map(_literal, HOLDER_KINDS))


def stray_call_sql() -> str:
    """A span of row 12 that is an HTTP client's call (docs/conventions.md, "HTTP client spans in a
    trace of their own"); the one-span trace, its root and budget are the derivation's to test."""
    rows = [rule.row for rule in STEP_RULES if rule.without_step_ancestor]
    return f"coalesce(step_row IN ({', '.join(map(_literal, rows))}), false) AND " \
        + _any_sql(tuple(Match(a) for a in STRAY_CALL_ATTRIBUTES))


def convention_sql() -> str:
    return _by_row(lambda r: _literal(r.convention))


def _rows_where(flag: Callable[[StepRule], bool]) -> str:
    rows = [_literal(rule.row) for rule in STEP_RULES if flag(rule)]
    return f"coalesce(step_row IN ({', '.join(rows)}), false)"


def is_agent_sql() -> str:
    return _rows_where(lambda r: r.agent)


def agent_span_sql() -> str:
    """An agent span of row 10, with a name attribute or without (one without is a wrapper)."""
    return " OR ".join(_any_sql(rule.any_of) for rule in STEP_RULES if rule.agent)


def bookkeeping_sql() -> str:
    """Framework bookkeeping that looks like a tool call (ADK's "(merged tools)")."""
    return _match_sql(Match("gen_ai.tool.name", BOOKKEEPING_TOOL_NAMES))


def never_step_sql() -> str:
    """An operation that is never a step (building an agent)."""
    return _match_sql(Match(GEN_AI_OP, NEVER_STEP_OPERATIONS))


def rows_before_11_sql() -> str:
    """The rows before 11: a step of one of them below a row-11 span makes that a wrapper."""
    return ", ".join(map(_literal, ROWS_BEFORE_11))


def needs_no_step_ancestor_sql() -> str:
    return _rows_where(lambda r: r.without_step_ancestor)


def _ranges(expr: str, ranges: tuple[tuple[int, int], ...]) -> str:
    return " OR ".join(f"{expr} = {low}" if low == high else f"{expr} BETWEEN {low} AND {high}"
                       for low, high in ranges)


def outcome_sql() -> str:
    """Rule 1: budget.outcome when it is one of the classes of docs/metrics.md §3."""
    return f"CASE WHEN budget_outcome IN ({', '.join(map(_literal, OUTCOMES))}) " \
           "THEN budget_outcome END"


def http_class_sql() -> str:
    whens = " ".join(f"WHEN {_ranges('http_response_status_code', ranges)} THEN {_literal(c)}"
                     for c, ranges in HTTP_CLASSES)
    return f"CASE {whens} END"


def grpc_class_sql() -> str:
    whens = " ".join(f"WHEN grpc_status_code IN ({', '.join(map(str, codes))}) "
                     f"THEN {_literal(c)}" for c, codes in GRPC_CLASSES)
    return f"CASE {whens} END"


_CLICKHOUSE_TRIM = "trim(BOTH ' \\t\\n\\r' FROM {x})"  # as Python's str.strip, for labels


@dataclass(frozen=True)
class Dialect:
    """The few functions the two engines spell differently."""

    name: str
    normalise: Callable[[str], str]  # lower-case, drop what is not [a-z0-9]
    digits_only: Callable[[str], str]
    extract_group: Callable[[str, str], str]  # a pattern's first group, as text or ''/NULL
    to_int: Callable[[str], str]
    regex_search: Callable[[str, str], str]
    drop_suffix: Callable[[str, str], str]  # the text without that ending, when more is left
    # whether a key of the span's attributes starts with one of these
    any_key_prefix: Callable[[tuple[str, ...]], str]
    lower_trim: Callable[[str], str]  # as ingest's as_label
    first_word: Callable[[str, str], str]  # the text before the first separator
    rest_after: Callable[[str, str], str]  # the text after the first separator ('' if none)
    int_div: Callable[[str, str], str]  # integer division of non-negative integers


DUCKDB = Dialect(
    "duckdb",
    normalise=lambda x: f"regexp_replace(lower({x}), '[^a-z0-9]', '', 'g')",
    digits_only=lambda n: f"regexp_full_match({n}, '[0-9]+')",
    extract_group=lambda n, p: f"regexp_extract({n}, {p}, 1)",
    to_int=lambda x: f"TRY_CAST(nullif({x}, '') AS BIGINT)",
    regex_search=lambda x, p: f"regexp_matches({x}, {p})",
    drop_suffix=lambda x, s: f"CASE WHEN length({x}) > {len(s)} AND suffix({x}, {_literal(s)}) "
                             f"THEN left({x}, length({x}) - {len(s)}) ELSE {x} END",
    any_key_prefix=lambda prefixes: "len(list_filter(json_keys(attributes), lambda k: "
    + " OR ".join(f"starts_with(k, {_literal(p)})" for p in prefixes) + ")) > 0",
    lower_trim=lambda x: f"lower(trim({x}))",
    first_word=lambda x, sep: f"split_part({x}, {sep}, 1)",
    rest_after=lambda x, sep: f"substr({x}, strpos({x}, {sep}) + 1)",
    int_div=lambda a, b: f"({a} // {b})",
)
CLICKHOUSE = Dialect(
    "clickhouse",
    normalise=lambda x: f"replaceRegexpAll(lowerUTF8({x}), '[^a-z0-9]', '')",
    digits_only=lambda n: f"match({n}, '^[0-9]+$')",
    extract_group=lambda n, p: f"extract({n}, {p})",
    to_int=lambda x: f"toInt64OrNull(nullIf({x}, ''))",
    regex_search=lambda x, p: f"match({x}, {p})",
    drop_suffix=lambda x, s: f"if(length({x}) > {len(s)} AND endsWith({x}, {_literal(s)}), "
                             f"substring({x}, 1, length({x}) - {len(s)}), {x})",
    # mapKeys of the Collector's SpanAttributes, read in derive_build.sql's raw step
    any_key_prefix=lambda prefixes: "arrayExists(k -> "
    + " OR ".join(f"startsWith(k, {_literal(p)})" for p in prefixes) + ", attribute_keys)",
    lower_trim=lambda x: "lowerUTF8(" + _CLICKHOUSE_TRIM.format(x=x) + ")",
    first_word=lambda x, sep: f"splitByString({sep}, {x})[1]",
    rest_after=lambda x, sep: f"substring({x}, position({x}, {sep}) + 1)",
    int_div=lambda a, b: f"intDiv({a}, {b})",
)
DIALECTS = {d.name: d for d in (DUCKDB, CLICKHOUSE)}


def code_sql(dialect: Dialect, n: str) -> str:
    """Rule 4: the code of a normalised text `n`: the text when only digits, else the three
    digits right after `code` or `status`, else NULL."""
    prefixes = "|".join(CODE_PREFIXES)
    after = dialect.extract_group(n, _pattern(f"(?:{prefixes})([0-9]{{3}})"))
    return f"CASE WHEN {dialect.digits_only(n)} THEN {dialect.to_int(n)} " \
           f"ELSE {dialect.to_int(after)} END"


def text_class_sql(n: str, c: str) -> str:
    """Rule 4 on one normalised text `n` with code `c` (expressions): its class, or NULL."""
    whens = []
    for rule in TEXT_CLASSES:
        tests = [f"{n} LIKE {_literal('%' + word + '%')}" for word in rule.contains]
        if rule.codes:
            tests.append(f"({_ranges(c, rule.codes)})")
        whens.append(f"WHEN {' OR '.join(tests)} THEN {_literal(rule.result)}")
    return "CASE " + " ".join(whens) + " END"


def tool_timeout_result_sql(dialect: Dialect) -> str:
    """A tool step, not ERROR, whose result is the OpenAI Agents SDK's timeout text."""
    tests = " OR ".join(f"coalesce({dialect.regex_search(column(a), _pattern(TOOL_TIMEOUT_RESULT))}"
                        ", false)" for a in RESULT_ATTRIBUTES)
    return f"(step_kind = 'tool' AND status_code <> {STATUS_ERROR} AND ({tests}))"


def roll_up_classes_sql() -> str:
    return ", ".join(map(_literal, ROLL_UP_CLASSES))


def run_outcomes_sql() -> str:
    """docs/metrics.md §2's stated run outcomes (a value outside them counts as absent,
    docs/metrics.md §4)."""
    return ", ".join(map(_literal, vocabulary.RUN_OUTCOMES))


def clickhouse_reads_sql() -> str:
    """The typed columns the rules read, from otel_traces' string-valued SpanAttributes, cast
    as store/rows/typed_attributes.py casts them (NULL when the key is absent)."""
    from store.rows import typed_attributes as typed

    casts = {
        typed.as_text: "{x}",
        typed.as_label: "lowerUTF8(" + _CLICKHOUSE_TRIM + ")",
        typed.as_text_head: "if(startsWith({x}, " + _pattern(typed.TOOL_RESULT_PREFIX)
                            + "), substringUTF8({x}, 1, " + str(typed.RESULT_HEAD_CHARS)
                            + "), NULL)",
        # urlsplit's hostname: only a URL with a scheme has one; lower-cased, no port
        typed.as_url_host: "nullIf(lowerUTF8(if(position({x}, '://') > 0, "
                           "domain(trimBoth({x})), '')), '')",
        typed.as_json_model: "nullIf(JSONExtractString({x}, 'model'), '')",
    }
    reads = []
    for attribute in sorted(convention_attributes() | {"budget.step.kind",
                                                         "budget.step.name"}):
        name, cast = TYPED_ATTRIBUTES[attribute]
        value = f"SpanAttributes[{_literal(attribute)}]"
        reads.append(f"if(mapContains(SpanAttributes, {_literal(attribute)}), "
                     f"{casts[cast].format(x=value)}, NULL) AS {name}")
    return ",\n               ".join(reads)


def budget_refusal_sql(n: str) -> str:
    """Rule 1b on one normalised text `n`: whether it names a budget refusal."""
    return " OR ".join(f"{n} LIKE {_literal('%' + word + '%')}"
                       for word in BUDGET_REFUSAL.contains)


def budget_dimensions_sql() -> str:
    return ", ".join(map(_literal, BUDGET_DIMENSIONS))


def billable_classes_sql() -> str:
    return ", ".join(map(_literal, BILLABLE_CLASSES))


def carries_usage_sql() -> str:
    """§11.2: the span has a valid usage value or a reported cost."""
    return "(" + " OR ".join(f"{column} IS NOT NULL" for column in CARRIER_COLUMNS) + ")"


def pricing_model_sql() -> str:
    """§11.3: the first model name present, as the span writes it."""
    return _first_present(PRICING_MODELS)


def provider_id_sql(dialect: Dialect, x: str) -> str:
    """A provider name `x` (any case, spaces around) as the price table names providers:
    lower-cased, OpenTelemetry's ids mapped (aws.bedrock → aws, gcp.* → google, ...)."""
    x = dialect.lower_trim(x)
    whens = " ".join(
        f"WHEN {x} LIKE {_literal(otel + '%')} THEN {_literal(table)}" if otel.endswith(".")
        else f"WHEN {x} = {_literal(otel)} THEN {_literal(table)}"
        for otel, table in PROVIDER_IDS)
    return f"CASE {whens} ELSE nullif({x}, '') END"


def pricing_provider_raw_sql(dialect: Dialect) -> str:
    """§11.3: the first provider present, as the span writes it (the first dot-separated word
    of ai.model.provider last), a value of NOT_PROVIDERS as if absent; NULL when none.
    provider_id_sql maps it."""
    sep = _literal(".")
    not_providers = ", ".join(map(_literal, NOT_PROVIDERS))
    named = [f"CASE WHEN {dialect.lower_trim(column(a))} NOT IN ({not_providers}) "
             f"THEN {_present(a)} END" for a in PRICING_PROVIDERS]
    return f"coalesce({', '.join(named)}, " \
           f"nullif({dialect.first_word(_present(PRICING_PROVIDER_FIRST_WORD), sep)}, ''))"


def model_prefix_sql(dialect: Dialect, model: str) -> str:
    """§11.3: the provider part of a `provider/model` name (NULL when the name has none)."""
    slash = _literal("/")
    has = f"strpos({model}, {slash}) > 1" if dialect is DUCKDB \
        else f"position({model}, {slash}) > 1"
    return f"CASE WHEN {has} THEN {dialect.first_word(model, slash)} END"


def model_after_prefix_sql(dialect: Dialect, model: str) -> str:
    """§11.3: the model part of a `provider/model` name (the name itself when it has none)."""
    slash = _literal("/")
    has = f"strpos({model}, {slash}) > 1" if dialect is DUCKDB \
        else f"position({model}, {slash}) > 1"
    return f"CASE WHEN {has} THEN {dialect.rest_after(model, slash)} ELSE {model} END"


def round_half_even_sql(dialect: Dialect, n: str, divisor: int = RATE_DIVISOR) -> str:
    """`n` / `divisor` rounded half to even, for a non-negative integer `n` (HUGEINT/Int128):
    a span's priced cost, Σ count × rate, in nano-dollars."""
    q = dialect.int_div(n, str(divisor))
    r = f"({n} - {q} * {divisor})"
    return f"({q} + CASE WHEN 2 * {r} > {divisor} OR (2 * {r} = {divisor} AND {q} % 2 = 1) " \
           "THEN 1 ELSE 0 END)"


def fragments(dialect: Dialect) -> dict[str, str]:
    return {
        "clickhouse_reads": clickhouse_reads_sql() if dialect is CLICKHOUSE else "",
        "step_row": step_row_sql(),
        "step_kind": step_kind_sql(),
        "row_name": default_name_sql(dialect),
        "raw_step_name": raw_step_name_sql(dialect),
        "step_name": step_name_sql(dialect),
        "unnamed": unnamed_sql(),
        "model_sign": model_sign_sql(dialect),
        "holder_kinds": holder_kinds_sql(),
        "named_rows": ", ".join(map(_literal, NAMED_ROWS)),
        "stray_call": stray_call_sql(),
        "convention": convention_sql(),
        "is_agent": is_agent_sql(),
        "rows_before_11": rows_before_11_sql(),
        "agent_span": agent_span_sql(),
        "bookkeeping": bookkeeping_sql(),
        "never_step": never_step_sql(),
        "needs_no_step_ancestor": needs_no_step_ancestor_sql(),
        "outcome_class": outcome_sql(),
        "http_class": http_class_sql(),
        "grpc_class": grpc_class_sql(),
        "normalise_x": dialect.normalise("x"),
        "code_n": code_sql(dialect, "n"),
        # DuckDB's lambda reads a struct {n, c}; ClickHouse's takes the two arrays side by side
        "text_class": text_class_sql("p.n", "p.c") if dialect is DUCKDB
        else text_class_sql("n", "c"),
        "tool_timeout_result": tool_timeout_result_sql(dialect),
        "roll_up_classes": roll_up_classes_sql(),
        "run_outcomes": run_outcomes_sql(),
        # docs/metrics.md §11
        # DuckDB's lambda reads a struct {n, c}, as text_class's
        "budget_refusal": budget_refusal_sql("p.n") if dialect is DUCKDB
        else budget_refusal_sql("n"),
        "budget_refusal_by": _literal(REFUSED_BY_BUDGET_REFUSAL),
        "budget_dimensions": budget_dimensions_sql(),
        "billable_classes": billable_classes_sql(),
        "carries_usage": carries_usage_sql(),
        "pricing_model": pricing_model_sql(),
        "pricing_provider_raw": pricing_provider_raw_sql(dialect),
        "provider_id_of_raw": provider_id_sql(dialect, "provider_raw"),
        "provider_id_of_prefix": provider_id_sql(dialect, "model_prefix"),
        "model_prefix": model_prefix_sql(dialect, "model_ref"),
        "model_after_prefix": model_after_prefix_sql(dialect, "model_ref"),
        "priced_nano": round_half_even_sql(dialect, "priced_raw"),
        # the same, of a priced_raw that fits a BIGINT (most spans), cast to one: 128-bit
        # arithmetic costs ~30x the 64-bit one in DuckDB, evaluated for every span read
        "priced_nano_bigint": round_half_even_sql(dialect, "priced_bigint"),
        # §11.1-§11.3 from the ClickHouse exporter's string values (usage_reads.py)
        **(usage_reads.fragments() if dialect is CLICKHOUSE else dict.fromkeys(
            usage_reads.MARKERS, "")),
    }


_MARKER = re.compile(r"/\*@([a-z0-9_]+)\*/")


def render(text: str, dialect: str) -> str:
    """Replace every `/*@name*/` marker by its fragment; an unknown marker is an error."""
    parts = fragments(DIALECTS[dialect])

    def substitute(found: re.Match[str]) -> str:
        if found[1] not in parts:
            raise KeyError(f"unknown conventions marker /*@{found[1]}*/")
        return parts[found[1]]
    return _MARKER.sub(substitute, text)


def convention_attributes() -> set[str]:
    """Every attribute the step rules and class rules read."""
    names: set[str] = set()
    for rule in STEP_RULES:
        names.update(match.attribute for match in (*rule.any_of, *rule.and_any_of,
                                                   *rule.unless))
        for source in rule.names:
            if isinstance(source, Joined):
                names.update((*source.first, *source.then))
            elif source != SPAN_NAME_LAST_WORD:
                names.add(source)
    names.update(RESULT_ATTRIBUTES)
    names.update(STRAY_CALL_ATTRIBUTES)
    names.update(PRICING_MODELS, PRICING_PROVIDERS, (PRICING_PROVIDER_FIRST_WORD,))
    return names
