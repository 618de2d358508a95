"""The lineage consumer: validates OpenLineage events, materializes table / column / data
lineage into one store (SQLite or PostgreSQL) and serves it. Shares no code with the emitter."""
