"""`budgetscope serve`'s composition: what runs in the one process that owns the database.

- compose.py: `Server`, built from `ServeOptions`: the database owner, the OTLP/HTTP and
  OTLP/gRPC receivers with the group-commit writer behind them, retention, the operator pages
  (/healthz, /readyz, /metrics), /budgets and /cli on the OTLP/HTTP port, the announcement
  beside the file, and the dashboard's configuration; started, then stopped with a drain.
- read_api.py: the commands /cli runs for a client (report, run, check, simulate), through the
  click group serve is handed, never imported (the CLI imports serve).
- metrics.py: what /metrics reports besides the receivers' counters (signals, retention).

budgetscope/commands/serve.py parses the options, builds a `Server`, prints where it listens and
runs the dashboard (dashboard/server/) on the main thread, or waits for a signal with --no-ui.
"""
