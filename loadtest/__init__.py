"""Load tests and benchmarks of cacheproxy, run by hand or by ``make bench``; not shipped.

- :mod:`loadtest.workload`: N distinct realistic pods as pre-encoded watch lines.
- :mod:`loadtest.linewatch`: a ListerWatcher that replays those lines, parsing each one.
- :mod:`loadtest.naive`: the baseline the budgets are argued against, a dict of parsed dicts.
- :mod:`loadtest.pipeline`: the real informer pipeline fed by that ListerWatcher, timed.
- :mod:`loadtest.records`: what is measured (timed phases, memory readings) and the clock.
- :mod:`loadtest.sizeof`: deep ``sys.getsizeof``, the cross-check of tracemalloc.
- :mod:`loadtest.ingest`: the ingest-rate and memory-per-object benchmark (docs/design.md §6), its CLI.
- :mod:`loadtest.report`: its Markdown report.
- :mod:`loadtest.serve`: the serving benchmark's CLI (lists, gets, watch fan-out, memory, offload
  against the simulator, a naive server and the socket floor, in one run); its parts:
  :mod:`loadtest.processes` (servers as processes through the CLI), :mod:`loadtest.httpclient`
  and :mod:`loadtest.listbench` (list/get scenarios), :mod:`loadtest.fanout`,
  :mod:`loadtest.watchclient` and :mod:`loadtest.broadcaster` (watch fan-out and its bare
  baseline), :mod:`loadtest.naiveserver`, :mod:`loadtest.floor`, :mod:`loadtest.serve_records`,
  :mod:`loadtest.serve_report` and :mod:`loadtest.charts`.
- :mod:`loadtest.authbench`: the latency access control adds, with warm caches.
- :mod:`loadtest.overload`: ten times more list clients than the daemon serves at once, slow
  readers and watchers: answers, 429s, peak memory, informer lag.
- :mod:`loadtest.realserver`: against a real kube-apiserver (:mod:`cacheproxy.envtest`): first
  sync beside curl and the Python decode floor, memory, memory across relists, event delivery
  lag over HTTP/1.1 and HTTP/2; its parts: :mod:`loadtest.realcluster` (the workload, curl),
  :mod:`loadtest.relists`, :mod:`loadtest.lagprobe` and :mod:`loadtest.realserver_report`.
- :mod:`loadtest.passthroughbench`: what pass-through costs against a real kube-apiserver:
  forwarded GETs and writes through the daemon beside the same requests sent straight to it
  (latency at 1 client, requests/s at 16), and a watch of an uncached resource delivering every
  event; its parts: :mod:`loadtest.passthroughbench_watch` and
  :mod:`loadtest.passthroughbench_report`.
- :mod:`loadtest.defaultreads`: reads with resourceVersion unset through a default and a strict daemon beside the API server's own (latency in three conditions, throughput, write -> visible delay, memory); its report :mod:`loadtest.defaultreads_report`.
- :mod:`loadtest.pagewalk`: a ``limit`` walk at an older resourceVersion against one full list.
- :mod:`loadtest.soak`: the chaos soak (``make soak``).
"""
