"""`budgetscope serve`'s server: what runs in the one process that owns the database.

- compose.py: `Server`, built from `ServeOptions`: the database owner, the OTLP/HTTP and
  OTLP/gRPC receivers (ingest) with the group-commit writer behind them, handed the routes this
  package serves beside the exports; retention, the announcement beside the file, and the
  dashboard's configuration; started, then stopped with a drain.
- operations.py: the operator pages, /healthz, /readyz (probes) and /metrics; metrics.py: what
  /metrics reports besides the receivers' counters (signals, retention).
- budgets_endpoint.py, prices_endpoint.py: /budgets and /prices, `budgetscope budgets` and
  `budgetscope prices` carried out through the single writer.
- cli_endpoint.py: /cli, the read API's HTTP side; read_api.py: the commands it runs for a
  client (report, run, check, simulate), through the click group serve is handed, never
  imported (the CLI imports serve).
- descriptors.py: each port's share of the process's file descriptors.

budgetscope/commands/serve.py parses the options, builds a `Server`, prints where it listens and
runs the dashboard (dashboard/server/) on the main thread, or waits for a signal with --no-ui.
Nothing here imports the CLI's commands (tests/project/test_layers.py).
"""
