"""The benchmarks' smoke tests and the load-test tools that listen on loopback or start processes."""
