"""What scenarios share: workloads, servers as processes, the real cluster, records and clocks,
the relay, deep sizes, the soaks' models and faults."""
