"""Budgets and step caps a team declares instead of (or before) its agents sending them
(docs/guide.md#declaring-budgets): budgets.py checks a declaration, stores it and marks the traces
it re-measures, in one transaction of the file's writer (its SQL in sql/); service.py carries
changes out inside `budgetscope serve`, through the single writer, and waits for their
re-derivation."""
