"""The long reliability run: ``python -m soak [--quick]``, figures printed at the end.

Not a pytest run: it takes minutes (``--quick``, about 3) to a quarter of an hour (full). It runs
the same checks as tests/reliability/ at a larger scale:

- crash: hundreds of mixed queues whose scheduler is SIGKILLed at random moments;
- bad input: thousands of generated queue files and command lines;
- dashboard: 2,000 jobs of mixed outcome through the headless dashboard (Textual's Pilot) for
  about ten minutes, with the process's memory sampled throughout.
"""
