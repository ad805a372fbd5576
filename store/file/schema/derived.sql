-- name: derived
-- derived: per-run and per-step facts computed from `spans` (docs/metrics.md §1-§6), so that reports and
-- the on-call run view read a few columns instead of walking span trees on every query.
-- Maintained only by store/derive/sql/derive_refresh.sql, which deletes and recomputes the rows of
-- the traces a write touched, inside that write's transaction; never edit these rows by hand.
-- No primary keys: a malformed trace (two roots, a parent cycle) must not make a whole ingest
-- batch fail on a constraint; the refresh de-duplicates instead.

-- trace_arrivals: when each trace's first span was stored. Spans are appended in arrival order,
-- so every span of a trace has received_at >= its trace's first arrival; the refresh reads spans
-- only from the earliest first arrival among the touched traces onwards, which DuckDB's min/max
-- zone maps turn into skipping all older row groups (103 ms → 15 ms for 20 traces among 1.4M
-- spans). Filled by the refresh itself, and by rebuild_all from the spans already stored.
CREATE TABLE IF NOT EXISTS trace_arrivals (
    trace_id             VARCHAR NOT NULL,
    first_received_at    TIMESTAMPTZ NOT NULL,
    -- Schema 6: its spans at its last derivation and when that was, so that a large trace
    -- marked again and again (late spans, log records) is derived at a bounded pace
    -- (store/derive/sql/pending/take_pending_derivations.sql).
    spans                BIGINT,
    derived_at           TIMESTAMPTZ
);

-- runs: one row per run (a span carrying budget.total_ms, or a trace root without one).
CREATE TABLE IF NOT EXISTS runs (
    run_id               VARCHAR NOT NULL,  -- trace_id, or trace_id/span_id when not the root
    trace_id             VARCHAR NOT NULL,
    span_id              VARCHAR NOT NULL,
    agent                VARCHAR,           -- gen_ai.agent.name, else the resource's service.name
    start_ns             BIGINT NOT NULL,   -- s
    end_ns               BIGINT NOT NULL,   -- the run span's own end
    budget_ms            BIGINT,            -- B; NULL = unknown budget, budget metrics skip it
    deadline_ns          BIGINT,            -- d
    window_end_ns        BIGINT,            -- e = min(run end, d), never before s
    reserve_ms           BIGINT,
    outcome              VARCHAR,           -- budget.run.outcome as sent
    elapsed_ms           DOUBLE NOT NULL,   -- run span end - s
    utilisation          DOUBLE,            -- elapsed / B
    latest_end_ns        BIGINT NOT NULL,   -- latest end of the run span or any descendant
    overrun_ms           DOUBLE,
    exhausted            BOOLEAN,           -- NULL when the budget is unknown
    refused_steps        BIGINT NOT NULL,
    steps                BIGINT NOT NULL,
    top_level_steps      BIGINT NOT NULL,
    unattributed_ms      DOUBLE,
    culprit_span_id      VARCHAR,
    culprit_key          VARCHAR,
    culprit_ms           DOUBLE,
    culprit_share        DOUBLE,
    holder_span_id       VARCHAR,
    holder_key           VARCHAR,
    week                 VARCHAR NOT NULL,  -- ISO week of s in UTC, e.g. 2026-W48
    -- where B came from (docs/metrics.md §8, docs/guide.md#declaring-budgets): 'span'
    -- (budget.total_ms), 'declared' (the agent's or the default declared budget), NULL when the
    -- budget is unknown. Last: schema 4 added it.
    budget_source        VARCHAR,
    -- Schema 6 (docs/metrics.md §4, docs/conventions.md): the culprit's and the holder's numbers
    -- (the rank of their start among the run's top-level steps, from 1), whether the holder was
    -- running when the deadline fired (else it is the last step started and none was running at d),
    -- and whether the run's root span never arrived (measured from its earliest span).
    culprit_step         INTEGER,
    holder_step          INTEGER,
    holder_at_deadline   BOOLEAN,
    root_missing         BOOLEAN NOT NULL DEFAULT false,
    -- Schema 7 (docs/metrics.md §11): tokens and dollars. Money is integer nano-dollars
    -- (10^-9 USD); counts are §11.1's (input with its cache, output with its reasoning), summed
    -- over the run's metered spans (metered_spans below), after the deadline too.
    tokens               BIGINT,
    input_tokens         BIGINT,
    cache_read_tokens    BIGINT,
    cache_write_tokens   BIGINT,
    output_tokens        BIGINT,
    reasoning_tokens     BIGINT,
    cost_nano            BIGINT,            -- Σ known costs: a lower bound unless cost_complete
    cost_complete        BOOLEAN,           -- no unpriced metered span, no possibly billed step
    unpriced_steps       BIGINT,            -- top-level steps with an unpriced metered span
    unmetered_steps      BIGINT,            -- model steps neither metered nor above one
    unmetered_billable_steps BIGINT,        -- of those, possibly billed (by their class)
    unpriced_models      VARCHAR[],         -- the models of its unpriced spans, sorted
    unattributed_cost_nano BIGINT,          -- metered spans under no top-level step
    unattributed_tokens  BIGINT,
    reported_total_nano  BIGINT,            -- the outermost aggregate's reported cost
    exhausted_by         VARCHAR,           -- budget.run.exhausted_by as stated (a label)
    usd_budget_nano      BIGINT,            -- B$ (§11.5) and where it came from:
    usd_budget_source    VARCHAR,           -- span, declared, NULL when unknown
    token_budget         BIGINT,            -- Btok, likewise
    token_budget_source  VARCHAR,
    cost_utilisation     DOUBLE,            -- cost / B$
    token_utilisation    DOUBLE,            -- tokens / Btok
    usd_exhausted        BOOLEAN,           -- NULL: B$ unknown and nothing enforced it
    tokens_exhausted     BOOLEAN,
    -- §11.6: the top-level step that spent most (ties: earliest start) and the one whose
    -- metered span crossed B$ (by end, start, span id), with their numbers (§4's form)
    cost_culprit_span_id VARCHAR,
    cost_culprit_key     VARCHAR,
    cost_culprit_step    INTEGER,
    cost_culprit_nano    BIGINT,
    cost_culprit_share   DOUBLE,
    cost_crosser_span_id VARCHAR,           -- NULL: not crossed, or crossed unattributed
    cost_crosser_key     VARCHAR,
    cost_crosser_step    INTEGER,
    cost_before_crossing_nano BIGINT,       -- the cumulative known cost before and after
    cost_after_crossing_nano BIGINT,        -- the crossing span (set whenever B$ was reached)
    overrun_usd_nano     BIGINT,            -- max(0, cost - B$)
    token_culprit_span_id VARCHAR,
    token_culprit_key    VARCHAR,
    token_culprit_step   INTEGER,
    token_culprit_tokens BIGINT,
    token_culprit_share  DOUBLE,
    token_crosser_span_id VARCHAR,
    token_crosser_key    VARCHAR,
    token_crosser_step   INTEGER,
    tokens_before_crossing BIGINT,
    tokens_after_crossing BIGINT,
    overrun_tokens       BIGINT
);
-- The on-call view looks one run up by id. No index on trace_id: the refresh's deletes by
-- trace are hash joins that would not use it, and every index costs on each refresh's
-- delete and insert (an early runs_by_trace/steps_by_trace pair is dropped here).
CREATE INDEX IF NOT EXISTS runs_by_run_id ON runs (run_id);
DROP INDEX IF EXISTS runs_by_trace;

-- steps: one row per step (a descendant of a run that docs/conventions.md recognises as one, or a
-- run span that is its own single step), attached to its nearest run ancestor. Run-level fields are
-- copied in (agent, run start, exhausted) because every report filters steps by them.
CREATE TABLE IF NOT EXISTS steps (
    run_id               VARCHAR NOT NULL,
    trace_id             VARCHAR NOT NULL,
    span_id              VARCHAR NOT NULL,
    parent_span_id       VARCHAR,
    top_step_id          VARCHAR NOT NULL,  -- the top-level step it rolls up into (itself if top)
    is_top_level         BOOLEAN NOT NULL,
    step_level           INTEGER NOT NULL,  -- 0 for top-level, 1 for a step inside one, ...
    span_name            VARCHAR NOT NULL,
    kind                 VARCHAR NOT NULL,
    name                 VARCHAR NOT NULL,
    step_key             VARCHAR NOT NULL,  -- kind:name
    -- what recognised it (store/derive/conventions.py): budget, otel_genai, openinference, ...
    convention           VARCHAR,
    class                VARCHAR NOT NULL,  -- docs/metrics.md §3
    start_ns             BIGINT NOT NULL,
    end_ns               BIGINT NOT NULL,
    duration_ms          DOUBLE NOT NULL,
    remaining_ms         BIGINT,
    cap_ms               BIGINT,
    allocated_ms         BIGINT,
    utilisation          DOUBLE,            -- duration / allocated (docs/metrics.md §5)
    -- top-level steps of budgeted runs only (docs/metrics.md §4)
    consumption_ms       DOUBLE,
    side_effect          VARCHAR,
    effect_status        VARCHAR,
    idempotency_key      VARCHAR,
    attempt              BIGINT,
    hedge                BOOLEAN,
    reconcile_result     VARCHAR,
    cleanup_ms           BIGINT,
    is_write             BOOLEAN NOT NULL,
    is_uncertain         BOOLEAN NOT NULL,  -- docs/metrics.md §6
    -- span links of reconcile steps: a reconcile step may name the write it reads back by link.
    link_targets         STRUCT(trace_id VARCHAR, span_id VARCHAR)[],
    agent                VARCHAR,
    run_start_ns         BIGINT NOT NULL,
    run_has_budget       BOOLEAN NOT NULL,
    run_exhausted        BOOLEAN,
    -- Schema 7 (docs/metrics.md §11): the tokens and known cost of the metered spans that are
    -- the step or lie under it (NULL: none), where that cost came from (reported, override,
    -- bundled, unpriced, mixed), and whether it is all known.
    input_tokens         BIGINT,
    cache_read_tokens    BIGINT,
    cache_write_tokens   BIGINT,
    output_tokens        BIGINT,
    reasoning_tokens     BIGINT,
    tokens               BIGINT,
    cost_nano            BIGINT,
    cost_complete        BOOLEAN,
    cost_source          VARCHAR,
    unmetered            BOOLEAN,           -- a model step neither metered nor above one
    possibly_billed      BOOLEAN,           -- unmetered, and of a class that may be billed
    refused_by           VARCHAR,           -- refused steps: time, tokens or usd (§2, §3 1b)
    -- top-level steps: what belongs to them (§11.6; parallel calls each pay in full), and
    -- that ÷ B$ or Btok (not clipped)
    consumption_usd_nano BIGINT,
    consumption_tokens   BIGINT,
    cost_share           DOUBLE,
    token_share          DOUBLE
);
CREATE INDEX IF NOT EXISTS steps_by_run_id ON steps (run_id);
DROP INDEX IF EXISTS steps_by_trace;

-- reconcile_links: each span link of a reconcile step, one row per link. The rows belong to the
-- reconcile step's trace (refreshed with it); the target may be in any trace, so looking up
-- "who links to the writes of this trace" is an index lookup on target_trace_id, whatever order
-- the two traces arrived in.
CREATE TABLE IF NOT EXISTS reconcile_links (
    trace_id             VARCHAR NOT NULL,  -- the reconcile step's
    span_id              VARCHAR NOT NULL,
    run_id               VARCHAR NOT NULL,
    target_trace_id      VARCHAR NOT NULL,  -- the linked span's (normally a write)
    target_span_id       VARCHAR NOT NULL,
    idempotency_key      VARCHAR,
    result               VARCHAR NOT NULL,  -- budget.reconcile.result, default unknown
    start_ns             BIGINT NOT NULL,
    end_ns               BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS reconcile_links_by_target ON reconcile_links (target_trace_id);

-- reconciliations: which reconcile step reads back which write (docs/metrics.md §6): the same
-- idempotency key in the same run, or a span link to the write. A view, not a table, because a
-- link may cross traces: computing it at read time keeps it right whatever order traces arrive.
CREATE OR REPLACE VIEW reconciliations AS
WITH reconcile_steps AS (
    SELECT run_id, trace_id, span_id, idempotency_key, start_ns, end_ns,
           coalesce(reconcile_result, 'unknown') AS result
    FROM steps WHERE kind = 'reconcile'
), by_key AS (
    SELECT w.trace_id AS write_trace_id, w.span_id AS write_span_id,
           r.trace_id AS reconcile_trace_id, r.span_id AS reconcile_span_id,
           r.result, r.start_ns, r.end_ns, r.idempotency_key
    FROM steps w JOIN reconcile_steps r
      ON r.run_id = w.run_id AND r.idempotency_key = w.idempotency_key
    WHERE w.is_write
), by_link AS (
    SELECT w.trace_id, w.span_id, r.trace_id, r.span_id, r.result, r.start_ns, r.end_ns,
           r.idempotency_key
    FROM reconcile_links r
    JOIN steps w ON w.trace_id = r.target_trace_id AND w.span_id = r.target_span_id
    WHERE w.is_write
)
SELECT * FROM by_key UNION SELECT * FROM by_link;

-- write_steps: every write step with what is known about it having been read back.
-- last_result is the result of its latest reconciliation (by start, then end, then span id).
CREATE OR REPLACE VIEW write_steps AS
SELECT w.*,
       coalesce(r.reconciliations, 0) AS reconciliations,
       r.reconciliations IS NOT NULL AS reconciled,
       w.is_uncertain AND r.reconciliations IS NULL AS orphan,
       r.last_result
FROM steps w
LEFT JOIN (
    SELECT write_trace_id, write_span_id, count(*) AS reconciliations,
           arg_max(result, (start_ns, end_ns, reconcile_span_id)) AS last_result
    FROM reconciliations GROUP BY ALL
) r ON r.write_trace_id = w.trace_id AND r.write_span_id = w.span_id
WHERE w.is_write;

-- step_lifts: the tools lifted out of a model step (docs/conventions.md: a tool whose parent step
-- is a model step stands at the model's level, and the model is not active while it runs), which
-- the consumption share reads. Kept so that a change of a declared budget re-measures stored
-- runs and steps (store/derive/sql/derive_budgets.sql) without recognising their spans
-- again.
CREATE TABLE IF NOT EXISTS step_lifts (
    trace_id             VARCHAR NOT NULL,
    run_span_id          VARCHAR NOT NULL,
    span_id              VARCHAR NOT NULL,  -- the tool step
    lifted_from          VARCHAR NOT NULL   -- the model step it is lifted out of
);

-- traces_awaiting_root: traces with spans stored but no run yet, because their root span has not
-- arrived (docs/conventions.md, "A trace without its root"), and when their last span was stored.
-- Kept by the derivation; serve marks a trace for derivation again once nothing of it has arrived
-- for the grace period, and it is then measured from its earliest span (runs.root_missing).
CREATE TABLE IF NOT EXISTS traces_awaiting_root (
    trace_id             VARCHAR NOT NULL,
    last_received_at     TIMESTAMPTZ NOT NULL
);

-- derivation_notes: what the derivation could not do in full for a trace, said rather than
-- hidden (a bound it met), shown with the trace's runs. Rewritten each time the trace is derived.
CREATE TABLE IF NOT EXISTS derivation_notes (
    trace_id             VARCHAR NOT NULL,
    note                 VARCHAR NOT NULL,  -- a stable name, e.g. http_beside_tool_skipped
    detail               VARCHAR NOT NULL   -- one sentence for the user
);

-- metered_spans (schema 7, docs/metrics.md §11.2-§11.3): one row per span that carries usage or
-- a reported cost, metered or not (an aggregate: a framework's total above its calls; a wrapper
-- of one call recorded twice), with its tokens as §11.1 counts them, the top-level step it
-- belongs to and its cost. Written by the derivation (store/derive/sql/derive_cost.sql); a
-- change of prices re-measures the cost columns from these rows without reading spans again.
CREATE TABLE IF NOT EXISTS metered_spans (
    run_id               VARCHAR NOT NULL,
    trace_id             VARCHAR NOT NULL,
    span_id              VARCHAR NOT NULL,
    top_step_id          VARCHAR,           -- NULL: unattributed (the run span, an agent made
                                            -- transparent, no step above)
    step_span_id         VARCHAR,           -- the nearest step it is or lies under
    steps_above          VARCHAR[] NOT NULL,  -- every step it is or lies under, nearest last
    is_metered           BOOLEAN NOT NULL,  -- false: an aggregate, or a wrapper twin
    depth                INTEGER NOT NULL,  -- below its run span (the outermost aggregate)
    start_ns             BIGINT NOT NULL,
    end_ns               BIGINT NOT NULL,
    model                VARCHAR,           -- §11.3's pricing model and provider (normalised)
    provider             VARCHAR,
    model_ref            VARCHAR,           -- the model as the span names it (before the
                                            -- provider/ split): what the bundled table matches
    input_tokens         BIGINT,            -- cache included (NULL: only a total was sent)
    fresh_input_tokens   BIGINT,
    cache_read_tokens    BIGINT,
    cache_write_tokens   BIGINT,
    output_tokens        BIGINT,            -- reasoning included
    reasoning_tokens     BIGINT,
    tokens               BIGINT NOT NULL,
    reported_nano        BIGINT,            -- the reported cost it carries, taken or not
    cost_nano            BIGINT,            -- NULL: unknown (never 0 for unknown)
    cost_source          VARCHAR,           -- reported, override, bundled, unpriced
    price_ref            VARCHAR,           -- the override or bundled price that priced it
    agent                VARCHAR,
    run_start_ns         BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS metered_spans_by_run_id ON metered_spans (run_id);
