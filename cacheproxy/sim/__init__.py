"""The built-in Kubernetes API server simulator: in-memory, exact on the wire.

It is the upstream of every test, of the demo and of the load test, and a tool on its own for
testing Kubernetes clients. See :class:`Simulator` (the ASGI app and Python API) and
:class:`SimServer` (serving it on a port, optionally over TLS).
"""

from cacheproxy.sim.app import Simulator
from cacheproxy.sim.config import SimConfig
from cacheproxy.sim.faults import Faults
from cacheproxy.sim.server import SimServer

__all__ = ["Faults", "SimConfig", "SimServer", "Simulator"]
