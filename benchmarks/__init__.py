"""gtui's benchmarks: `python -m benchmarks [--quick]` prints a table and writes BENCHMARKS.md."""
