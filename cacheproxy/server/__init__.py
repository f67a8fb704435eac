"""The HTTP face of the daemon: list / get / watch from the informers' stores on the Kubernetes
API paths, discovery, health. Imports the informer library and ``kube``; never ``upstream`` or
``sim`` (DESIGN §2)."""
