"""Benchmarks for contextshift. Run ``python -m benchmarks.shifting`` (add ``--quick`` for a smoke run).

Benchmark code only: nothing here is imported by the library or asserted by the test suite.
"""
