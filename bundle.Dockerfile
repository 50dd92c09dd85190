# generated from hack/olm-src/csv-base.yaml, ocp_gpu/install/, ocp_gpu/model/releases.py and
# ocp_gpu/crds/clusterpolicies.nvidia.com.yaml by hack/olm.py; edit those and run hack/generate.py
# The OLM bundle image (registry+v1): build from the repository root with
#   podman build -f bundle.Dockerfile -t quay.io/ocp-gpu/ocp-gpu-bundle:v<version> .
FROM scratch
LABEL operators.operatorframework.io.bundle.mediatype.v1=registry+v1
LABEL operators.operatorframework.io.bundle.manifests.v1=manifests/
LABEL operators.operatorframework.io.bundle.metadata.v1=metadata/
LABEL operators.operatorframework.io.bundle.package.v1=ocp-gpu
LABEL operators.operatorframework.io.bundle.channels.v1=stable,v0.x
LABEL operators.operatorframework.io.bundle.channel.default.v1=stable
LABEL com.redhat.openshift.versions=v4.18-v4.22
LABEL com.redhat.delivery.operator.bundle=true
COPY bundle/manifests /manifests/
COPY bundle/metadata /metadata/
