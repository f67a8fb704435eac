"""The built-in Kubernetes API server simulator: in-memory, exact on the wire.

It is the upstream of every test, of the demo and of the load test, and a tool on its own for
testing Kubernetes clients. See :class:`Simulator` (the ASGI app and Python API) and
:class:`SimServer` (serving it on a port, optionally over TLS).

Where things are: the app and its dispatch (:mod:`.simulator`), who may do what (:mod:`.requestauth`,
:mod:`.auth`, :mod:`.policy`, :mod:`.reviewanswers`), resource requests (:mod:`.resourcerequests`, verbs in
:mod:`.verbs`, answers' forms in :mod:`.render`), the verbs over the storage (:mod:`.api`,
:mod:`.writes`, :mod:`.strategy`; :mod:`.storage` and its records :mod:`.objects`), watches
(:mod:`.watchserving` for a request, :mod:`.watch` for its watcher and events), faults and the
control path (:mod:`.faults`, :mod:`.control`), serving on a port (:mod:`.server`, :mod:`.testpki`).
Request parsing, JSON answers, Status errors, discovery and the watch stream are
:mod:`cacheproxy.serving`'s, shared with the daemon's server.
"""

from cacheproxy.sim.faults import Faults
from cacheproxy.sim.server import SimServer
from cacheproxy.sim.simconfig import SimConfig
from cacheproxy.sim.simulator import Simulator

__all__ = ["Faults", "SimConfig", "SimServer", "Simulator"]
