-- name: scopes
-- scopes: each distinct InstrumentationScope once (the library that made the spans).
CREATE TABLE IF NOT EXISTS scopes (
    scope_id                 VARCHAR PRIMARY KEY,
    name                     VARCHAR NOT NULL,
    version                  VARCHAR NOT NULL,
    attributes               JSON NOT NULL,
    dropped_attributes_count UINTEGER NOT NULL,
    schema_url               VARCHAR NOT NULL
);
