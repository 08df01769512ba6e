"""gtui's benchmarks: `python -m benchmarks [--quick]` prints a table, writes docs/benchmarks.md."""
