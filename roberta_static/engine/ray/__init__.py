"""The pass on a Ray cluster: the driver and what runs on the cluster."""
