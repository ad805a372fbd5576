"""budgetscope's composition root: the CLI and configuration that wire ingest, queries and the
dashboard together. Nothing else lives here."""
