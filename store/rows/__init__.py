"""What a stored row is: the row contract between decoding and the writer (batch.py: FlatBatch
and its columns), the attributes docs/metrics.md and docs/conventions.md compute with and
their typed columns (typed_attributes.py), the vocabulary those values take (vocabulary.py), and
why a span, a message or a file was refused (rejections.py)."""
