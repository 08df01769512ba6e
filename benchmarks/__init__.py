"""gtui's benchmark suite: `python -m benchmarks [--quick]` prints a table and writes BENCHMARKS.md."""
