"""The store's tests (store/): the database file (schema, migrations, span keys, read-only
opening), the writer, retention, the vocabulary and the SQL registry, and the derivation of runs
and steps from spans: the conventions of docs/conventions.md (on hand-built traces and on the
real libraries' fixtures of tests/real_fixtures), declared budgets, tokens, dollars and prices
(docs/metrics.md §11), and what keeps one span or trace from stopping it."""
