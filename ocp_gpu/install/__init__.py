"""What installs the operator: the one source for its Deployment, ServiceAccount and RBAC.

`rbac.yaml` holds the operator's permissions (each rule says which code path needs it);
`manifests.py` builds the ServiceAccount, ClusterRole, ClusterRoleBinding, Role,
RoleBinding and Deployment for a namespace.  hack/generate.py writes them into the OLM
bundle's ClusterServiceVersion and the Helm chart, and the end-to-end tests bind the same
rules to the identity the operator runs as.  Pure data: no I/O beyond reading the
package's own YAML.
"""
