"""The informer library: Reflector → EventQueue → Store (+ indexes, EventLog) → SharedInformer.

client-go's ``tools/cache`` design on asyncio. It talks to the network only through the
:class:`~cacheproxy.informer.listwatch.ListerWatcher` protocol, which ``cacheproxy.upstream``
implements and tests fake. It imports only ``cacheproxy.kube`` and ``cacheproxy.errors``.
"""
