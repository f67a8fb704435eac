"""The daemon: the composition root. It reads the configuration (:mod:`.config`), wires the
informers, the upstream and the server together, and owns their lifecycle (docs/design.md §2)."""
