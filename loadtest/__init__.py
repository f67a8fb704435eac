"""Load tests and benchmarks of cacheproxy, run by hand or by ``make bench``; not shipped.

- :mod:`loadtest.workload`: N distinct realistic pods as pre-encoded watch lines.
- :mod:`loadtest.linewatch`: a ListerWatcher that replays those lines, parsing each one.
- :mod:`loadtest.naive`: the baseline the budgets are argued against, a dict of parsed dicts.
- :mod:`loadtest.pipeline`: the real informer pipeline fed by that ListerWatcher, timed.
- :mod:`loadtest.records`: what is measured (timed phases, memory readings) and the clock.
- :mod:`loadtest.sizeof`: deep ``sys.getsizeof``, the cross-check of tracemalloc.
- :mod:`loadtest.ingest`: the ingest-rate and memory-per-object benchmark (DESIGN §6), its CLI.
- :mod:`loadtest.report`: its Markdown report.
"""
