-- name: derive_reach
-- Find the spans whose parent never arrived after the first walk, where derive_refresh.sql left them, and set up a walk of their traces again.
--
-- Runs when every trace has a run and none is capped (gate `orphans_later`). The walk reaches
-- each span at most once below a run (a span is stored once, store/file/schema/span_keys.sql,
-- so it has one parent; and a walk stops at the run below it), and reaches every span with a
-- parent when no parent is missing and no parent cycle or the depth cap hides one: counting
-- its rows is the check (~1 ms per 40,960 GenAI spans), where looking for missing parents
-- first cost an anti join of every span with its parent (~7 ms) that nearly always finds none.
-- A trace the walk did not reach whole for another reason has no orphan, and is not walked
-- again.
-- gates: whether some span with a parent was not reached (and no orphan to walk again unless
-- the search below finds one)
SELECT (SELECT count(*) FROM derive_walk WHERE depth > 0)
           <> (SELECT coalesce(sum(with_parent), 0) FROM derive_anchors) AS unreached,
       false AS orphans_rewalk;

-- The missing parents, as derive_refresh.sql finds them when it looks first.
-- when: unreached
INSERT INTO derive_orphans SELECT * FROM derive_missing_parents;

-- gates: whether any trace has an orphan to hang below its run span and walk again
-- when: unreached
SELECT (SELECT count(*) FROM derive_orphans) > 0 AS orphans_rewalk;

-- Each orphan below its trace's anchor, as derive_refresh.sql's anchors say it: every trace has
-- a run here, so the anchor is its earliest-starting run without a parent, else its
-- earliest-starting run whose parent is missing.
-- when: orphans_rewalk
UPDATE derive_spans SET walk_parent = a.anchor
FROM derive_orphans o
JOIN (SELECT s.trace_id,
             coalesce(arg_min(s.span_id, (s.start_ns, s.span_id))
                          FILTER (WHERE s.is_run AND s.parent_span_id IS NULL),
                      arg_min(s.span_id, (s.start_ns, s.span_id))
                          FILTER (WHERE s.is_run AND o.span_id IS NOT NULL)) AS anchor
      FROM derive_spans s
      LEFT JOIN derive_orphans o ON o.trace_id = s.trace_id AND o.span_id = s.span_id
      WHERE s.trace_id IN (SELECT trace_id FROM derive_orphans)
      GROUP BY s.trace_id) a ON a.trace_id = o.trace_id
WHERE o.trace_id = derive_spans.trace_id AND o.span_id = derive_spans.span_id
  AND o.span_id IS DISTINCT FROM a.anchor;

-- when: orphans_rewalk
DELETE FROM derive_walk WHERE trace_id IN (SELECT trace_id FROM derive_orphans);
-- The walk again (derive_walk.sql), of these traces only; derive_recognise.sql sets the view
-- anew for its own second walk.
-- when: orphans_rewalk
CREATE OR REPLACE TEMP VIEW derive_walk_spans AS
SELECT * FROM derive_spans WHERE trace_id IN (SELECT trace_id FROM derive_orphans);
