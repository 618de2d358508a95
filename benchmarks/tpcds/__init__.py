"""TPC-DS benchmark of the emitter: data generation, plan capture and the runner.

`python -m benchmarks.tpcds generate|capture|run` — see benchmarks/README.md.
"""
