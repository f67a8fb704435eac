"""Pure Kubernetes data: resources, keys, selectors, resource versions, list options, Status
builders and discovery documents. No I/O: every other layer builds on it (DESIGN §2)."""
