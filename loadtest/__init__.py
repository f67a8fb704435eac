"""Load tests and benchmarks of cacheproxy, run by hand or by ``make bench``; not shipped.

One entry point: ``python -m loadtest <scenario> [options]`` (``--help`` lists the scenarios;
``make bench`` and ``make bench-full`` run them). The package is laid out by role:

- :mod:`loadtest.scenarios`: what is measured and judged, one module per scenario with a
  ``main(argv)`` (ingest, serve, authbench, overload, pagewalk, realserver, syncmodes, tiers,
  consistentbench, defaultreads, passthroughbench, warmrestart, soak, soakreal);
- :mod:`loadtest.clients`: what drives the servers (HTTP list/get clients, watch clients and
  the fan-out measurement, a ListerWatcher replaying pre-encoded lines, kubectl and writers of
  the soaks, the event-lag probe, the real-server query set);
- :mod:`loadtest.baselines`: what the daemon is compared with (a dict of parsed dicts, a naive
  server, the socket floor, a bare broadcaster);
- :mod:`loadtest.harness`: what scenarios share (workloads, servers as processes, the real
  cluster, records and clocks, the bandwidth-limiting relay, deep sizes, the soaks' models and
  fault injection);
- :mod:`loadtest.reports`: the Markdown reports and charts written from the records.

Reports that document a claim are committed under ``loadtest/results/<date>-<scenario>/``;
other output (``loadtest/out*/``) is not.
"""
