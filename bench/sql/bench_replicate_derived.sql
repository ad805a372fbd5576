-- name: bench_replicate_derived
-- Copies runs, steps and reconcile_links $copies more times under new trace ids (bench only).
-- A copy's trace id is the md5 of the original and the copy number: same length, still hex.
CREATE TEMP TABLE bench_copy AS SELECT range AS n FROM range(1, $copies::BIGINT + 1);
INSERT INTO runs BY NAME
SELECT * EXCLUDE (n) REPLACE (
    md5(trace_id || n) AS trace_id,
    md5(trace_id || n) || substr(run_id, 33) AS run_id)
FROM runs, bench_copy;
INSERT INTO steps BY NAME
SELECT * EXCLUDE (n) REPLACE (
    md5(trace_id || n) AS trace_id,
    md5(trace_id || n) || substr(run_id, 33) AS run_id)
FROM steps, bench_copy;
INSERT INTO reconcile_links BY NAME
SELECT * EXCLUDE (n) REPLACE (
    md5(trace_id || n) AS trace_id,
    md5(trace_id || n) || substr(run_id, 33) AS run_id,
    md5(target_trace_id || n) AS target_trace_id)
FROM reconcile_links, bench_copy;
CHECKPOINT;
