"""The one way every command and the dashboard open what they read (reader.py): a cursor of
serve's owning connection, the ClickHouse backend with its derived tables brought up to date,
or the DuckDB file read-only, derived or migrated first when it can be opened for writing at
once."""
