"""What a stored row is: the row contract between decoding and the writer (batch.py: FlatBatch
and its columns), the attributes SPEC.md computes with and their typed columns
(typed_attributes.py), the SPEC's vocabulary those values take (vocabulary.py), and why a span,
a message or a file was refused (rejections.py)."""
