"""The HTTP face of the daemon: list / get / watch from the informers' stores on the Kubernetes
API paths, discovery, OpenAPI, health, metrics, and cacheproxy's own API. Imports the informer library, ``kube`` and ``serving``
(the ASGI toolkit it shares with the simulator); never ``upstream`` or ``sim`` (docs/design.md §2).

Where things are, in the order a request meets them:

- :mod:`.app` — :class:`~.app.CacheServer`, the ASGI app: the resources it serves, readiness,
  shutdown of watches, and the pipeline of each request;
- :mod:`.admission` — bounds (414/431/400), authentication and authorization (:mod:`.access`,
  :mod:`.tokenfile`), in-flight and watcher limits (429);
- :mod:`.refusals` — what a read-only cache cannot serve (writes, exec/logs/proxies, websocket
  and SPDY upgrades, paths outside the API), answered with a Status naming the API server;
- :mod:`.routing` — which handler answers a path; :mod:`.options` — the server's settings;
- :mod:`.reads` — get and list (:mod:`.resource` keeps the RV and paging rules, :mod:`.query` and
  :mod:`.snapshots` select), Tables (:mod:`.crdtables` for custom resources);
- :mod:`.watching` — one watch request: its start, history, initial state, then live events;
- :mod:`.watchhub` — the fan-out of the informer's events to every watcher, and
  :mod:`.watchfilter` — what a watcher sees of an event (one function for live and replay), the
  shared line bytes, and the RVs of a relist's difference;
- :mod:`.metrics` and :mod:`.statuspage` — ``/metrics`` and ``/status``; :mod:`.homepage` —
  the page at ``/`` for browsers;
- :mod:`.openapi` — ``/openapi/v2`` and ``/openapi/v3``, upstream's documents kept;
- :mod:`.ownapi` — cacheproxy's own API under ``/cacheproxy/`` (FastAPI, the only place it is
  used, imported on the first request there), with :mod:`.indexquery` — the questions asked of a
  resource's indexes.
"""
