{{/*
The ClusterPolicy's spec sections, in the CRD's order (ocp_gpu/crds/clusterpolicies.nvidia.com.yaml);
each is exposed as a top-level value of the same name.  tests/unit/test_helm_chart.py fails when
this list and the CRD differ.
*/}}
{{- define "ocp-gpu.policySections" -}}
operator daemonsets driver toolkit devicePlugin dcgm dcgmExporter gfd nodeStatusExporter validator hostPaths cdi psa psp gds gdrcopy migManager sandboxWorkloads vgpuManager vgpuDeviceManager vfioManager kataManager sandboxDevicePlugin kataSandboxDevicePlugin ccManager mig
{{- end -}}

{{/*
Values under a section that configure the chart, not the ClusterPolicy (operator.image is the
operator Deployment's image).
*/}}
{{- define "ocp-gpu.chartOnlyKeys" -}}
{{- dict "operator" (list "image") | toJson -}}
{{- end -}}

{{- define "ocp-gpu.labels" -}}
app.kubernetes.io/name: ocp-gpu
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}
