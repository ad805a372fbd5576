"""The attribute names of budgetscope's SPEC §2, and the few OpenTelemetry conventions the SDK
sets beside them. One place, so a typo cannot create a second dialect."""

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

# Not in SPEC §2 (budgetscope ignores them); they make the ladder visible in a trace viewer.
PHASE_EVENT = "budget.phase"
PHASE = "budget.phase"
CONSUMED_RATIO = "budget.consumed_ratio"
PARTIAL_REASON = "budget.partial.reason"

ERROR_TYPE = "error.type"
HTTP_STATUS = "http.response.status_code"
GRPC_STATUS = "rpc.grpc.status_code"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"

# The OpenAI Agents SDK span a step annotates (adapters/openai_agents.py): its own tracing ids.
AGENTS_TRACE_ID = "openai_agents.trace_id"
AGENTS_SPAN_ID = "openai_agents.span_id"
AGENTS_SPAN_TYPE = "openai_agents.span_type"

STEP_KINDS = frozenset({"model", "tool", "subagent", "backoff", "queue", "reconcile", "other"})
STEP_OUTCOMES = frozenset({"ok", "client_timeout", "upstream_error", "refused", "cancelled",
                           "client_error", "error"})
RUN_OUTCOMES = frozenset({"completed", "partial", "exhausted", "failed", "cancelled"})
SIDE_EFFECTS = frozenset({"read", "write"})
EFFECT_STATUSES = frozenset({"none", "possible", "completed"})
RECONCILE_RESULTS = frozenset({"landed", "not_landed", "unknown"})
