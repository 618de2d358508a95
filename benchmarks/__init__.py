"""Benchmarks of the emitter (not part of the installed packages): see benchmarks/README.md."""
