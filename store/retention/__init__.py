"""Retention (passes.py): traces older than N days removed whole, in slices of one transaction
each, so that inside `budgetscope serve` the single writer commits the receivers' batches between
two slices; and the file's space given back. Its SQL is in sql/."""
