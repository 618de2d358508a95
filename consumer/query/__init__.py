"""The read side: lineage questions answered from the store (graph walks, Marquez shapes, the query CLI)."""
