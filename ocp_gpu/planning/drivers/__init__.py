"""Driver decisions: which driver DaemonSets should exist (one per key), what each runs,
which are stale, and what is wrong with the nodes' keys, images and pods.  Pure."""
