"""The attribute names budgetscope reads (its docs/metrics.md §2), the few OpenTelemetry
conventions the SDK sets beside them, and the words each may hold, as sets and as `Literal` types.
One place, so a typo cannot create a second dialect."""

from typing import Literal, get_args

TOTAL_MS = "budget.total_ms"
DEADLINE_UNIX_MS = "budget.deadline_unix_ms"
RESERVE_MS = "budget.reserve_ms"
RUN_OUTCOME = "budget.run.outcome"

STEP_KIND = "budget.step.kind"
STEP_NAME = "budget.step.name"
REMAINING_MS = "budget.remaining_ms"
CAP_MS = "budget.cap_ms"
ALLOCATED_MS = "budget.allocated_ms"
OUTCOME = "budget.outcome"
SIDE_EFFECT = "budget.side_effect"
EFFECT_STATUS = "budget.effect_status"
IDEMPOTENCY_KEY = "budget.idempotency_key"
ATTEMPT = "budget.attempt"
HEDGE = "budget.hedge"
RECONCILE_RESULT = "budget.reconcile.result"
CLEANUP_MS = "budget.cleanup_ms"

# Token and dollar budgets (docs/metrics.md §11).
TOTAL_TOKENS = "budget.total_tokens"
TOTAL_USD = "budget.total_usd"
RUN_EXHAUSTED_BY = "budget.run.exhausted_by"
REFUSED_BY = "budget.refused_by"
COST_USD = "budget.cost_usd"
REMAINING_TOKENS = "budget.remaining_tokens"
REMAINING_USD = "budget.remaining_usd"
ALLOCATED_TOKENS = "budget.allocated_tokens"

# Not read by budgetscope; they make the ladder, a run's note and a retry's decision visible in
# a trace viewer.
PHASE_EVENT = "budget.phase"
PHASE = "budget.phase"
CONSUMED_RATIO = "budget.consumed_ratio"
PARTIAL_REASON = "budget.partial.reason"
FAILURE_REASON = "budget.failure.reason"
RETRY_DECLINED_EVENT = "budget.retry_declined"
RETRY_REASON = "budget.retry.reason"
REMOTE_SOURCE = "budget.remote.source"
REMOTE_PROBLEM = "budget.remote.problem"
RESERVE_USD = "budget.reserve_usd"  # the dollars only landing steps may spend
PHASE_BY = "budget.phase.by"  # which budget moved the ladder: time, usd or tokens

ERROR_TYPE = "error.type"
HTTP_STATUS = "http.response.status_code"
GRPC_STATUS = "rpc.grpc.status_code"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_CACHE_WRITE = "gen_ai.usage.cache_write.input_tokens"
GEN_AI_REASONING = "gen_ai.usage.reasoning.output_tokens"

# The OpenAI Agents SDK span a step annotates (adapters/openai_agents.py): its own tracing ids.
AGENTS_TRACE_ID = "openai_agents.trace_id"
AGENTS_SPAN_ID = "openai_agents.span_id"
AGENTS_SPAN_TYPE = "openai_agents.span_type"

StepKind = Literal["model", "tool", "subagent", "backoff", "queue", "reconcile", "other"]
StepOutcome = Literal["ok", "client_timeout", "upstream_error", "refused", "cancelled",
                      "client_error", "error"]
RunOutcome = Literal["completed", "partial", "exhausted", "failed", "cancelled"]
SideEffect = Literal["read", "write"]
EffectStatus = Literal["none", "possible", "completed"]
ReconcileResult = Literal["landed", "not_landed", "unknown"]
BudgetDimension = Literal["time", "usd", "tokens"]

# The same words as sets, for checking values at run time (derived: they cannot drift apart).
STEP_KINDS: frozenset[str] = frozenset(get_args(StepKind))
STEP_OUTCOMES: frozenset[str] = frozenset(get_args(StepOutcome))
RUN_OUTCOMES: frozenset[str] = frozenset(get_args(RunOutcome))
SIDE_EFFECTS: frozenset[str] = frozenset(get_args(SideEffect))
EFFECT_STATUSES: frozenset[str] = frozenset(get_args(EffectStatus))
RECONCILE_RESULTS: frozenset[str] = frozenset(get_args(ReconcileResult))
