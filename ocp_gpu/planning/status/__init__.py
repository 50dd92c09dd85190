"""The ClusterPolicy's status: which policy is active, its state and conditions, batched
events, the operator's health gauges.  Pure."""
