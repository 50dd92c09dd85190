"""The ClusterPolicy: its spec read once into typed, frozen data with the CRD's defaults,
every field's rule, and the checks the schema cannot make.  Pure data."""
