"""budgetscope's composition root: the CLI and configuration that wire ingest, queries and the
dashboard together. Nothing else lives here."""

from budgetscope.memory_tuning import prefer_small_pages

prefer_small_pages()  # before any command imports NumPy, which reads the setting once
