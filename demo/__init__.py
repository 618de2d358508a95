"""The project demo (`./run demo`, i.e. `python -m demo`): a sample PySpark pipeline run with the
emitter attached, and its column lineage printed as a table."""
