-- name: derive_steps
-- The steps, their levels and classes, and the runs, from the walk (as store/derive/sql/derive_steps.sql); derive_measure.sql follows.

-- 2b. HTTP client spans beside their call (as derive_steps.sql step 2b): a row-12 step with no
-- step below it inside exactly one tool or model step of its run and no other (agents do not
-- count) rolls up into that call. Runs where the pairs to compare would pass 4,000,000 are left
-- as they are.
CREATE TABLE budgetscope_tmp_beside_steps ENGINE = Memory SETTINGS compress = 1 AS
SELECT w.trace_id AS trace_id, w.run_span_id AS run_span_id, w.span_id AS span_id,
       s.step_kind AS step_kind, s.start_ns AS start_ns, s.end_ns AS end_ns, w.path AS path,
       s.needs_no_step_ancestor AND (w.trace_id, w.run_span_id, w.span_id) NOT IN (
           SELECT trace_id, run_span_id, assumeNotNull(step_parent) FROM budgetscope_tmp_walk
           WHERE own AND is_step AND step_parent IS NOT NULL) AS lone_call
FROM budgetscope_tmp_walk w
JOIN budgetscope_tmp_spans s ON s.trace_id = w.trace_id AND s.span_id = w.span_id
WHERE w.own AND w.is_step AND NOT s.is_agent;

CREATE TABLE budgetscope_tmp_beside ENGINE = Memory SETTINGS compress = 1 AS
WITH runs AS (
    SELECT trace_id, run_span_id
    FROM budgetscope_tmp_beside_steps
    GROUP BY trace_id, run_span_id
    HAVING countIf(lone_call) > 0 AND countIf(step_kind IN (/*@holder_kinds*/)) > 0
       AND countIf(lone_call) * count() <= 4000000
)
SELECT c.trace_id AS trace_id, c.run_span_id AS run_span_id, c.span_id AS span_id,
       any(s.path) AS tool_path
FROM budgetscope_tmp_beside_steps c
JOIN budgetscope_tmp_beside_steps s ON s.trace_id = c.trace_id AND s.run_span_id = c.run_span_id
WHERE c.lone_call AND (c.trace_id, c.run_span_id) IN (SELECT * FROM runs)
  AND s.span_id != c.span_id AND s.start_ns <= c.start_ns AND s.end_ns >= c.end_ns
GROUP BY c.trace_id, c.run_span_id, c.span_id
HAVING count() = 1 AND min(s.step_kind IN (/*@holder_kinds*/)) = 1;

-- 2d. HTTP client spans in a trace of their own (as derive_steps.sql step 2d, over every trace
-- at once): the model and tool steps by service and 2^27 ns bucket, a run that is its own single
-- step among them; each trace of one root HTTP client span of row 12 without a budget joins the
-- one such step of another trace of its service that holds its interval (two or more, or none:
-- it stays a run).
CREATE TABLE budgetscope_tmp_call_steps ENGINE = Memory SETTINGS compress = 1 AS
WITH stray_services AS (
    -- only the services a stray root belongs to can hold one: none, no step is kept
    SELECT DISTINCT coalesce(service_name, '') AS service FROM budgetscope_tmp_spans
    WHERE stray_root
), held AS (
    SELECT w.trace_id AS trace_id, w.span_id AS span_id, w.run_span_id AS run_span_id,
           s.start_ns AS start_ns, s.end_ns AS end_ns,
           coalesce(s.service_name, '') AS service_name
    FROM budgetscope_tmp_walk w
    JOIN budgetscope_tmp_spans s ON s.trace_id = w.trace_id AND s.span_id = w.span_id
    WHERE w.own AND w.is_step AND s.step_kind IN (/*@holder_kinds*/)
      AND coalesce(s.service_name, '') IN (SELECT service FROM stray_services)
    UNION ALL
    SELECT trace_id, span_id, span_id AS run_span_id, start_ns, end_ns,
           coalesce(service_name, '') AS service_name
    FROM budgetscope_tmp_spans
    WHERE is_run AND candidate AND step_kind IN (/*@holder_kinds*/)
      AND coalesce(service_name, '') IN (SELECT service FROM stray_services)
      AND (trace_id, span_id) NOT IN (SELECT trace_id, run_span_id FROM budgetscope_tmp_walk
                                      WHERE own AND is_step)
      AND (trace_id, span_id) NOT IN (SELECT trace_id, span_id FROM budgetscope_tmp_walk
                                      WHERE own AND is_step)
)
SELECT service_name,
       toNullable(arrayJoin(range(intDiv(start_ns, 134217728),
                                  intDiv(end_ns, 134217728) + 1))) AS bucket,
       start_ns, end_ns, trace_id, span_id, run_span_id
FROM held WHERE intDiv(end_ns, 134217728) - intDiv(start_ns, 134217728) < 4096
UNION ALL
SELECT service_name, CAST(NULL, 'Nullable(Int64)') AS bucket, start_ns, end_ns, trace_id,
       span_id, run_span_id
FROM held WHERE intDiv(end_ns, 134217728) - intDiv(start_ns, 134217728) >= 4096;

CREATE TABLE budgetscope_tmp_stray_joins ENGINE = Memory SETTINGS compress = 1 AS
WITH strays AS (
    SELECT trace_id AS s_trace_id, span_id AS s_span_id,
           coalesce(service_name, '') AS s_service, start_ns AS s_start, end_ns AS s_end
    FROM budgetscope_tmp_spans
    -- the traces of one span among those with a stray root: without a stray, no trace is
    -- grouped (grouping every trace cost more than the rest of the rule on the sample)
    WHERE stray_root AND trace_id IN (
        SELECT trace_id FROM budgetscope_tmp_spans
        WHERE trace_id IN (SELECT trace_id FROM budgetscope_tmp_spans WHERE stray_root)
        GROUP BY trace_id HAVING count() = 1)
), holding AS (
    SELECT s.s_trace_id AS trace_id, s.s_span_id AS span_id, k.trace_id AS holder_trace_id,
           k.span_id AS holder_span_id, k.run_span_id AS holder_run_span_id
    FROM strays s
    JOIN budgetscope_tmp_call_steps k
      ON k.service_name = s.s_service AND k.bucket = intDiv(s.s_start, 134217728)
    WHERE k.start_ns <= s.s_start AND k.end_ns >= s.s_end AND k.trace_id != s.s_trace_id
    UNION ALL
    SELECT s.s_trace_id, s.s_span_id, k.trace_id, k.span_id, k.run_span_id
    FROM strays s
    JOIN (SELECT * FROM budgetscope_tmp_call_steps WHERE bucket IS NULL) k
      ON k.service_name = s.s_service
    WHERE k.start_ns <= s.s_start AND k.end_ns >= s.s_end AND k.trace_id != s.s_trace_id
)
SELECT trace_id, span_id, any(holder_trace_id) AS holder_trace_id,
       any(holder_span_id) AS holder_span_id, any(holder_run_span_id) AS holder_run_span_id
FROM holding GROUP BY trace_id, span_id HAVING count() = 1;

-- Such a span, and every span whose nearest step it was, roll up into the call instead; a stray
-- that joined a step is walked below it (`span_trace_id`: the trace the span is stored in), and
-- its own walk goes.
CREATE TABLE budgetscope_tmp_walk_final ENGINE = Memory SETTINGS compress = 1 AS
SELECT w.trace_id AS trace_id, w.trace_id AS span_trace_id, w.run_span_id AS run_span_id,
       w.span_id AS span_id,
       w.is_step AND NOT (b.span_id IS NOT NULL AND w.span_id = b.span_id) AS is_step,
       w.step_parent AS step_parent, w.own AS own, w.nested AS nested, w.depth AS depth,
       if(b.span_id IS NOT NULL, b.tool_path, w.path) AS path
FROM budgetscope_tmp_walk w
LEFT JOIN budgetscope_tmp_beside b ON b.trace_id = w.trace_id AND b.run_span_id = w.run_span_id
                                  AND b.span_id = w.path[-1]
WHERE w.trace_id NOT IN (SELECT trace_id FROM budgetscope_tmp_stray_joins)
UNION ALL
SELECT h.trace_id AS trace_id, j.trace_id AS span_trace_id, h.run_span_id AS run_span_id,
       j.span_id AS span_id, false AS is_step, toNullable(h.span_id) AS step_parent,
       true AS own, false AS nested, toUInt32(h.depth + 1) AS depth, h.path AS path
FROM budgetscope_tmp_stray_joins j
JOIN budgetscope_tmp_walk h ON h.trace_id = j.holder_trace_id AND h.span_id = j.holder_span_id
                           AND h.run_span_id = j.holder_run_span_id;

-- 3. Run-level facts that do not depend on steps.
-- The runs' own tree (as derive_steps.sql step 2c): each run with every run nested in it.
CREATE TABLE budgetscope_tmp_run_tree ENGINE = Memory SETTINGS compress = 1 AS
WITH RECURSIVE tree AS (
    SELECT trace_id, span_id AS run_span_id, span_id AS below_span_id
    FROM budgetscope_tmp_walk_final WHERE depth = 0
    UNION ALL
    SELECT t.trace_id, t.run_span_id, w.span_id
    FROM tree t
    JOIN budgetscope_tmp_walk_final w ON w.trace_id = t.trace_id
                                     AND w.run_span_id = t.below_span_id
    WHERE w.nested AND w.depth > 0
)
SELECT * FROM tree;

-- What a run is whatever its budget: derive_budgeted.sql applies B to it (a re-measure reads
-- the same from the stored runs: derive_remeasure.sql).
CREATE TABLE budgetscope_tmp_run_facts ENGINE = Memory SETTINGS compress = 1 AS
WITH lone_agent AS (
    -- docs/conventions.md, the run's agent: the agent step that stands alone among the run's
    -- top-level steps (as derive_steps.sql step 3)
    SELECT w.trace_id AS trace_id, w.run_span_id AS run_span_id, any(s.step_name) AS name
    FROM budgetscope_tmp_walk_final w
    JOIN budgetscope_tmp_spans s ON s.trace_id = w.trace_id AND s.span_id = w.span_id
    WHERE w.own AND w.is_step AND w.step_parent IS NULL
    GROUP BY w.trace_id, w.run_span_id
    HAVING count() = 1 AND min(s.is_agent) = 1
), runs_raw AS (
    SELECT r.*,
           -- the root is the run "trace_id" only when the trace has exactly one root
           countIf(r.parent_span_id IS NULL) OVER (PARTITION BY r.trace_id) AS roots_in_trace,
           -- the run's agent (docs/conventions.md, as derive_steps.sql step 3)
           coalesce(nullIf(r.gen_ai_agent_name, ''), if(r.is_agent, r.step_name, NULL), a.name,
                    r.service_name) AS agent
    FROM budgetscope_tmp_spans r
    LEFT JOIN lone_agent a ON a.trace_id = r.trace_id AND a.run_span_id = r.span_id
    WHERE r.is_run
      AND (r.trace_id, r.span_id) NOT IN (SELECT trace_id, span_id
                                          FROM budgetscope_tmp_stray_joins)
), own_end AS (
    SELECT w.trace_id AS trace_id, w.run_span_id AS run_span_id, max(s.end_ns) AS own_end_ns
    FROM budgetscope_tmp_walk_final w
    JOIN budgetscope_tmp_spans s ON s.trace_id = w.span_trace_id AND s.span_id = w.span_id
    GROUP BY w.trace_id, w.run_span_id
), latest AS (
    -- each run's own spans and the runs nested in it (budgetscope_tmp_run_tree)
    SELECT t.trace_id AS trace_id, t.run_span_id AS run_span_id,
           max(o.own_end_ns) AS latest_end_ns
    FROM budgetscope_tmp_run_tree t
    JOIN own_end o ON o.trace_id = t.trace_id AND o.run_span_id = t.below_span_id
    GROUP BY t.trace_id, t.run_span_id
)
-- a run whose root never arrived is its trace's only run: its id is the trace id
SELECT if((r.parent_span_id IS NULL AND r.roots_in_trace = 1) OR r.root_missing, r.trace_id,
          concat(r.trace_id, '/', r.span_id)) AS run_id,
       r.trace_id AS trace_id, r.span_id AS span_id,
       toLowCardinality(r.agent) AS agent,
       r.start_ns AS start_ns, r.end_ns AS end_ns,
       r.budget_total_ms AS budget_total_ms,
       r.budget_deadline_unix_ms AS budget_deadline_unix_ms,
       r.budget_reserve_ms AS reserve_ms,
       r.budget_run_outcome AS outcome,
       l.latest_end_ns AS latest_end_ns,
       r.root_missing AS root_missing,
       -- docs/metrics.md §11.5: the budgets the run states in tokens and dollars, and which
       -- budget its stated outcome names (a value outside §2's is absent: time)
       r.budget_total_tokens AS budget_total_tokens,
       r.budget_total_usd_nano AS budget_total_usd_nano,
       if(r.budget_run_exhausted_by IN (/*@budget_dimensions*/), r.budget_run_exhausted_by,
          NULL) AS exhausted_by,
       toLowCardinality(concat(
           toString(toISOYear(toDateTime(intDiv(r.start_ns, 1000000000), 'UTC'))), '-W',
           leftPad(toString(toISOWeek(toDateTime(intDiv(r.start_ns, 1000000000), 'UTC'))),
                   2, '0'))) AS week
FROM runs_raw r
JOIN latest l ON l.trace_id = r.trace_id AND l.run_span_id = r.span_id;

-- 4. Steps (docs/conventions.md), as derive_refresh.sql step 4: the walk's steps and the runs that
-- are their own single step, with the lone-agent test; then their levels (a transparent agent adds
-- none, a tool inside a model step stands beside it); then rule 6's evidence per step.
CREATE TABLE budgetscope_tmp_found ENGINE = Memory SETTINGS compress = 1 AS
SELECT trace_id, run_span_id, span_id, step_parent
FROM budgetscope_tmp_walk_final WHERE own AND is_step;

INSERT INTO budgetscope_tmp_found
SELECT trace_id, span_id AS run_span_id, span_id, CAST(NULL, 'Nullable(String)') AS step_parent
FROM budgetscope_tmp_spans
WHERE is_run AND candidate
  AND (trace_id, span_id) NOT IN (SELECT trace_id, span_id FROM budgetscope_tmp_stray_joins)
  AND (trace_id, span_id) NOT IN (SELECT trace_id, run_span_id FROM budgetscope_tmp_found)
  AND (trace_id, span_id) NOT IN (SELECT trace_id, span_id FROM budgetscope_tmp_found);

CREATE TABLE budgetscope_tmp_step_tree ENGINE = Memory SETTINGS compress = 1 AS
WITH children AS (
    SELECT trace_id, run_span_id, assumeNotNull(step_parent) AS span_id, count() AS steps_below
    FROM budgetscope_tmp_found WHERE step_parent IS NOT NULL
    GROUP BY trace_id, run_span_id, span_id
)
SELECT f.trace_id AS trace_id, f.run_span_id AS run_span_id, f.span_id AS span_id,
       f.step_parent AS step_parent, s.step_kind AS step_kind,
       s.is_agent AND count() OVER (PARTITION BY f.trace_id, f.run_span_id, f.step_parent) = 1
           AND coalesce(c.steps_below, 0) > 0 AS transparent
FROM budgetscope_tmp_found f
JOIN budgetscope_tmp_spans s ON s.trace_id = f.trace_id AND s.span_id = f.span_id
LEFT JOIN children c ON c.trace_id = f.trace_id AND c.run_span_id = f.run_span_id
                    AND c.span_id = f.span_id;

CREATE TABLE budgetscope_tmp_tree ENGINE = Memory SETTINGS compress = 1 AS
WITH RECURSIVE tree AS (
    SELECT trace_id, run_span_id, span_id, transparent,
           toInt32(if(transparent, -1, 0)) AS step_level,
           if(transparent, CAST(NULL, 'Nullable(String)'), toNullable(span_id)) AS top_step_id,
           if(transparent, CAST(NULL, 'Nullable(String)'), toNullable(span_id)) AS ctx_id,
           if(transparent, CAST(NULL, 'Nullable(String)'), toNullable(step_kind)) AS ctx_kind,
           CAST(NULL, 'Nullable(String)') AS lifted_from, toUInt32(0) AS depth
    FROM budgetscope_tmp_step_tree WHERE step_parent IS NULL
    UNION ALL
    SELECT n.trace_id, n.run_span_id, n.span_id, n.transparent,
           toInt32(if(n.transparent OR (n.step_kind = 'tool' AND t.ctx_kind = 'model'),
                      t.step_level, t.step_level + 1)),
           multiIf(n.transparent, t.top_step_id,
                   if(n.step_kind = 'tool' AND t.ctx_kind = 'model', t.step_level,
                      t.step_level + 1) = 0, toNullable(n.span_id),
                   t.top_step_id),
           if(n.transparent, t.ctx_id, toNullable(n.span_id)),
           if(n.transparent, t.ctx_kind, toNullable(n.step_kind)),
           if(NOT n.transparent AND n.step_kind = 'tool' AND t.ctx_kind = 'model', t.ctx_id,
              CAST(NULL, 'Nullable(String)')),
           toUInt32(t.depth + 1)
    FROM budgetscope_tmp_step_tree n
    JOIN tree t ON n.trace_id = t.trace_id AND n.run_span_id = t.run_span_id
               AND n.step_parent = t.span_id
    WHERE t.depth < 200
)
SELECT * FROM tree WHERE NOT transparent
ORDER BY depth
LIMIT 1 BY trace_id, run_span_id, span_id;

CREATE TABLE budgetscope_tmp_rolled ENGINE = Memory SETTINGS compress = 1 AS
-- (the evidence span's id is named apart: ClickHouse would read `span_id` below as the alias)
SELECT trace_id, run_span_id, above AS span_id, specific AS rolled_class
FROM (
    SELECT w.trace_id AS trace_id, w.run_span_id AS run_span_id, w.span_id AS evidence_id,
           above, s.specific AS specific, s.end_ns AS end_ns, s.start_ns AS start_ns
    FROM budgetscope_tmp_walk_final w
    JOIN budgetscope_tmp_spans s ON s.trace_id = w.span_trace_id AND s.span_id = w.span_id
    ARRAY JOIN w.path AS above
    WHERE s.has_evidence AND w.depth > 0
)
WHERE above != evidence_id
QUALIFY row_number() OVER (PARTITION BY trace_id, run_span_id, above
                           ORDER BY end_ns DESC, start_ns DESC, evidence_id DESC) = 1;

-- What a step is whatever the budgets: derive_budgeted.sql adds what a declared cap and its
-- run's B give it (a re-measure reads the same from the stored steps: derive_remeasure.sql).
CREATE TABLE budgetscope_tmp_step_facts ENGINE = Memory SETTINGS compress = 1 AS
WITH classed AS (
    SELECT s.*, t.run_span_id AS run_span_id, t.step_level AS step_level,
           t.top_step_id AS top_step_id,
           -- rule 6: a step without evidence of its own (rule 4's fallback or rule 5),
           -- whatever its status
           if(s.specific IS NULL
                  AND g.rolled_class IN (/*@roll_up_classes*/),
              g.rolled_class, s.own_class) AS class
    FROM budgetscope_tmp_tree t
    JOIN budgetscope_tmp_spans s ON s.trace_id = t.trace_id AND s.span_id = t.span_id
    LEFT JOIN budgetscope_tmp_rolled g ON g.trace_id = t.trace_id
        AND g.run_span_id = t.run_span_id AND g.span_id = t.span_id
)
SELECT r.run_id AS run_id, s.trace_id AS trace_id, s.span_id AS span_id,
       s.parent_span_id AS parent_span_id, assumeNotNull(s.top_step_id) AS top_step_id,
       CAST(s.step_level = 0, 'Bool') AS is_top_level,
       s.step_level AS step_level,
       -- the columns reports group and filter by are LowCardinality: the weekly report's step
       -- groups on 2M steps took 366 ms with plain strings, 206 ms with these
       s.name AS span_name, toLowCardinality(s.step_kind) AS kind, s.step_name AS name,
       toLowCardinality(concat(s.step_kind, ':', s.step_name)) AS step_key,
       toLowCardinality(s.convention) AS convention,
       toLowCardinality(s.class) AS class, s.start_ns AS start_ns, s.end_ns AS end_ns,
       (s.end_ns - s.start_ns) / 1e6 AS duration_ms,
       s.budget_remaining_ms AS remaining_ms, s.budget_cap_ms AS cap_ms,
       s.budget_allocated_ms AS own_allocated_ms,
       s.budget_side_effect AS side_effect, s.budget_effect_status AS effect_status,
       s.budget_idempotency_key AS idempotency_key, s.budget_attempt AS attempt,
       s.budget_hedge AS hedge, s.budget_reconcile_result AS reconcile_result,
       s.budget_cleanup_ms AS cleanup_ms,
       CAST(coalesce(s.budget_side_effect = 'write', false), 'Bool') AS is_write,
       -- docs/metrics.md §6: effect_status decides when present; absent that, the class does
       CAST(coalesce(s.budget_side_effect = 'write', false) AND if(
           s.budget_effect_status IS NOT NULL, s.budget_effect_status = 'possible',
           s.class IN ('client_timeout', 'cancelled')), 'Bool') AS is_uncertain,
       if(s.step_kind = 'reconcile', s.link_targets, []) AS link_targets,
       -- which budget refused a refused step (docs/metrics.md §2, §3 rule 1b): its own
       -- budget.refused_by, else usd for a gateway's budget refusal, else time
       if(s.class = 'refused', coalesce(
           if(s.budget_refused_by IN (/*@budget_dimensions*/), s.budget_refused_by, NULL),
           if(s.budget_refusal, /*@budget_refusal_by*/, NULL), 'time'), NULL) AS refused_by,
       toLowCardinality(r.agent) AS agent, r.start_ns AS run_start_ns,
       -- the run's ISO week, which the DuckDB steps table does not carry: the weekly report
       -- groups steps by it directly instead of joining them to their runs' weeks
       toLowCardinality(r.week) AS week
FROM classed s
JOIN budgetscope_tmp_run_facts r ON r.trace_id = s.trace_id AND r.span_id = s.run_span_id;

-- What a re-measure (derive_remeasure.sql) reads besides the stored runs and steps, kept with
-- them (derive_measure.sql exchanges them): the budget numbers the spans state, which the
-- stored rows fold into B, deadlines and allocations, and the model step each lifted tool
-- came out of (the consumption share's holes).
CREATE TABLE budgetscope_own_budgets_next ENGINE = MergeTree ORDER BY (trace_id, span_id) AS
SELECT trace_id, span_id, budget_total_ms, budget_deadline_unix_ms, budget_allocated_ms
FROM budgetscope_tmp_spans
WHERE budget_total_ms IS NOT NULL OR budget_deadline_unix_ms IS NOT NULL
   OR budget_allocated_ms IS NOT NULL;

CREATE TABLE budgetscope_step_lifts_next ENGINE = MergeTree
ORDER BY (trace_id, run_span_id, span_id) AS
SELECT trace_id, run_span_id, span_id, lifted_from
FROM budgetscope_tmp_tree WHERE lifted_from IS NOT NULL;
