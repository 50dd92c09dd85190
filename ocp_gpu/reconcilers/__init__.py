"""Glue, one screen each: read the in-memory view -> plan (pure) -> render -> apply -> record.

A reconciler never decides anything itself; it calls planning/ and applies
the result through kube/, collecting per-object errors so that one bad node
or object never blocks the others.
"""
