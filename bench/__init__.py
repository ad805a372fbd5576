"""Benchmarks that print figures, never assertions: each runs from the repository's root as
`.venv/bin/python -m bench.NAME` (a regular package, so no script edits sys.path). bench/ab.py
runs any of them against a baseline revision in the same run. Nothing here imports tests/;
tests may import bench.support."""
