-- name: resources
-- resources: each distinct OTLP Resource once. Spans point here by resource_id so that the
-- same twenty resource attributes are not repeated on every span of a batch.
CREATE TABLE IF NOT EXISTS resources (
    -- blake2b-64 of the serialized Resource plus its schema_url: stable across loads, so a
    -- resource sent again by an exporter retry maps to the same row.
    resource_id              VARCHAR PRIMARY KEY,
    service_name             VARCHAR,
    attributes               JSON NOT NULL,
    dropped_attributes_count UINTEGER NOT NULL,
    schema_url               VARCHAR NOT NULL
);
