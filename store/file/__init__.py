"""The database file: opening it with one owner at a time (database.py), the process's one owning
connection (owner.py), the schema and its migrations (ddl.py, schema/, schema_migrations/), and
the SQL registry every .sql file of the store is loaded through (sql_files.py)."""
