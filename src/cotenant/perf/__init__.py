"""Performance models: measured and derived throughput/latency of DNNs on GPU slices."""
