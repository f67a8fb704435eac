"""HTTP serving shared by the daemon's server and the simulator: an ASGI toolkit over uvicorn.

Both servers are raw ASGI applications (docs/design.md §4: a framework costs several times more per
request on the hot paths); what they have in common lives here, above ``kube`` (Status builders,
discovery documents, watch lines) and below ``server`` and ``sim``, which never import each other:

- :mod:`.asgi` — message types, the parsed :class:`Request`, the extensions beyond ASGI;
- :mod:`.responses` — JSON answers and content negotiation, lists from stored parts, every error
  as a ``metav1.Status``;
- :mod:`.discoveryroutes` — ``/api``, ``/apis``, groups and resource lists, legacy or aggregated;
- :mod:`.watchstream` — a watch response: bounded mailbox, batches, bookmarks, deadline, stall;
- :mod:`.uvicorn_adapter` — the one module that reaches into uvicorn's internals (serving on our
  own socket, scatter/gather writes, flow control, connection upgrades), checked against the versions pinned;
- :mod:`.listen` and :mod:`.tls` — sockets we bind, client certificates, rotating certificates.

Import from here; the submodules may move.
"""

from cacheproxy.serving.asgi import (
    BODY_WRITER,
    RESPONSE_FLOW,
    UPGRADE,
    BodyPart,
    BodyWriter,
    Message,
    Receive,
    Request,
    ResponseFlow,
    Scope,
    Send,
    Tunnel,
    Upgrade,
    lifespan,
)
from cacheproxy.serving.discoveryroutes import Discovery, Document
from cacheproxy.serving.listen import bind
from cacheproxy.serving.responses import (
    JSON,
    NO_CACHE,
    JsonAnswers,
    error_line,
    indented,
    send_body,
    send_error,
    send_groups,
    send_parts,
    send_status,
    websocket_denial,
    with_header,
)
from cacheproxy.serving.tls import CertificateReloader, file_stamp, user_from_peer_cert
from cacheproxy.serving.uvicorn_adapter import ServingProtocol, UvicornRunner, serving_protocol
from cacheproxy.serving.watchstream import (
    DEADLINE_BOOKMARK_MARGIN,
    TOO_SLOW,
    LiveWatch,
    Mailbox,
    WatchWriter,
    closed_on_disconnect,
    live_lines,
    watch_batches,
)

__all__ = [
    "BODY_WRITER",
    "DEADLINE_BOOKMARK_MARGIN",
    "JSON",
    "NO_CACHE",
    "RESPONSE_FLOW",
    "TOO_SLOW",
    "UPGRADE",
    "BodyPart",
    "BodyWriter",
    "CertificateReloader",
    "Discovery",
    "Document",
    "JsonAnswers",
    "LiveWatch",
    "Mailbox",
    "Message",
    "Receive",
    "Request",
    "ResponseFlow",
    "Scope",
    "Send",
    "ServingProtocol",
    "Tunnel",
    "Upgrade",
    "UvicornRunner",
    "WatchWriter",
    "bind",
    "closed_on_disconnect",
    "error_line",
    "file_stamp",
    "indented",
    "lifespan",
    "live_lines",
    "send_body",
    "send_error",
    "send_groups",
    "send_parts",
    "send_status",
    "serving_protocol",
    "user_from_peer_cert",
    "watch_batches",
    "websocket_denial",
    "with_header",
]
