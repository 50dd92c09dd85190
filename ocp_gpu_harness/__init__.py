"""The local control plane harness: a real Kubernetes on one machine, offline.

This package is test and demo infrastructure, not part of the operator. It
starts real processes (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok's fake kubelets), writes PKI and kubeconfigs to disk,
and talks to the API server: it does process, file and network I/O, and the
operator itself never imports it.

- `binaries`: where the control plane binaries come from (env, cache, build).
- `cluster`: `LocalControlPlane`, the processes, their PKI and the audit log.
- `openshift`: the OpenShift APIs the operator reads, emulated with CRDs.
- `nodes`: fake GPU and CPU nodes, an MCO-style upgrade, pod fates.
"""
