"""The CLI's tests (budgetscope/commands/): every command through click or as a real process,
on a file and against a running server (report, run, check, ingest, budgets, prices), its
messages and exit statuses, and its output inert in a terminal, a CSV or a log."""
