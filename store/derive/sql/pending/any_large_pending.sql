-- name: any_large_pending
-- Whether a paced run's pass of large traces may have anything to take (parameter: LARGE_TRACE_SPANS).
--
-- store/derive/pending.py asks before the pass: a pass that takes nothing still costs ~1.8 ms
-- of CPU (its transaction, its take, its count), which serve's derivation thread paid every
-- turn. A superset of what take_pending_derivations.sql takes: the pace is left to it.
SELECT EXISTS (SELECT 1 FROM pending_derivations p
               JOIN trace_arrivals a ON a.trace_id = p.trace_id
               WHERE a.spans >= ?) AS large
