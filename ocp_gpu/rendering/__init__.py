"""Manifests from templates: the only user of jinja2.

Templates live in the repository's top-level `templates/state-<component>/NNNN_<kind>.yaml.j2`
(shipped in the wheel as `ocp_gpu/templates/` by setup.py), numbered in apply order;
`templating.templates_dir()` is the one place their path is resolved.  Rendering is pure (context in, manifest
dicts out) and injection-proof: every `{{ value }}` is emitted as a JSON value,
which is YAML, so no string from a ClusterPolicy or the cluster can add structure.
"""
