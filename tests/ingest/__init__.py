"""Ingest's tests (ingest/): the OTLP/HTTP and OTLP/gRPC receivers (framing, back-pressure, a
full disk), the decoders (protobuf, OTLP JSON, logs; their limits and fuzzing), the file loader
and its forms, bad and hostile input, and the bundled sample traces it is fed (sample_traces/)."""
