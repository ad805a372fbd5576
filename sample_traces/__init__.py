"""Seeded generator of realistic AI-agent traces (OTLP) and the bundled sample built from it.

`python -m sample_traces.generate --out PATH` writes traces; `sample.jsonl.gz` next to this file
is its default output, committed so the demo and the tests need no generation step.
"""
