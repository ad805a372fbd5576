-- name: database_status
-- What the database holds: spans, runs, when the newest span was stored, traces waiting for
-- their derivation and traces whose derivation failed (store/derive/pending.py) (filters unused).
SELECT (SELECT count(*) FROM spans) AS spans,
       (SELECT count(*) FROM runs) AS runs,
       (SELECT max(received_at) FROM spans) AS newest_received,
       (SELECT count(DISTINCT trace_id) FROM pending_derivations) AS traces_pending_derivation,
       (SELECT count(*) FROM derivation_failures) AS traces_failed_derivation;
