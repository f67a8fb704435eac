"""cacheproxy: a fast, indexed, read-only cache in front of the Kubernetes API server.

Layers (docs/design.md §2): ``kube`` (pure data) ← ``informer`` ← ``upstream`` / ``server`` / ``sim`` ←
``daemon`` ← ``cli``. Enforced by import-linter contracts in ``pyproject.toml``.
"""

__version__ = "0.1.0.dev0"
