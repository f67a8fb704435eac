"""The built-in Kubernetes API server simulator: in-memory, exact on the wire.

It is the upstream of every test, of the demo and of the load test, and a tool on its own for
testing Kubernetes clients. See :class:`Simulator` (the ASGI app and Python API) and
:class:`SimServer` (serving it on a port, optionally over TLS).

Where things are: the app and its dispatch (:mod:`.app`), who may do what (:mod:`.admission`,
:mod:`.auth`, :mod:`.policy`, :mod:`.reviews`), resource requests (:mod:`.resources`, verbs in
:mod:`.routing`, answers' forms in :mod:`.render`), the verbs over the storage (:mod:`.api`,
:mod:`.writes`, :mod:`.strategy`; :mod:`.store` and its records :mod:`.objects`), watches
(:mod:`.watching` for a request, :mod:`.watch` for its watcher and events), faults and the
control path (:mod:`.faults`, :mod:`.control`), serving on a port (:mod:`.server`, :mod:`.tls`).
Request parsing, JSON answers, Status errors, discovery and the watch stream are
:mod:`cacheproxy.serving`'s, shared with the daemon's server.
"""

from cacheproxy.sim.app import Simulator
from cacheproxy.sim.config import SimConfig
from cacheproxy.sim.faults import Faults
from cacheproxy.sim.server import SimServer

__all__ = ["Faults", "SimConfig", "SimServer", "Simulator"]
