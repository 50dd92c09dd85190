{{/*
The ClusterPolicy's spec sections, in the CRD's order (ocp_gpu/crds/clusterpolicies.nvidia.com.yaml);
each is a top-level value of the same name.  tests/unit/test_helm_chart.py fails when this list
and the CRD differ.
*/}}
{{- define "ocp-gpu.policySections" -}}
operator daemonsets driver toolkit devicePlugin draDriver dcgm dcgmExporter gfd nodeStatusExporter validator hostPaths cdi psa psp gds gdrcopy migManager sandboxWorkloads vgpuManager vgpuDeviceManager vfioManager kataManager sandboxDevicePlugin kataSandboxDevicePlugin ccManager mig
{{- end -}}

{{/*
How each value NVIDIA's chart knows reaches the ClusterPolicy: the rule NVIDIA's
templates/clusterpolicy.yaml applies to it (at the release we track), by section and key.  A key
not listed is a ClusterPolicy field NVIDIA's chart does not know (operator.defaultRuntime,
devicePlugin.resourceConfig, ...): it is copied as given.  The rules:
  set      written as given when set: not false, 0, "", [] or {} (NVIDIA's `if`)
  always   written as given
  string   written as a string when set (NVIDIA quotes versions: --set driver.version=550 stays "550")
  chart    the chart's own (the Deployment, ConfigMaps, hooks, NVIDIADriver): never written
  dropped  NVIDIA's chart accepts it and never writes it
  others   a rule of its own (ocp-gpu.policySpec)
*/}}
{{- define "ocp-gpu.valueRules" -}}
{{- $image := dict "repository" "set" "image" "set" "version" "string" "imagePullPolicy" "set" "imagePullSecrets" "set" "resources" "set" "env" "set" "args" "set" "hostNetwork" "set" "enabled" "always" -}}
operator:
  runtimeClass: set
  defaultGPUMode: set
  use_ocp_driver_toolkit: set
  metrics: metrics
  {{- range $key := list "repository" "image" "version" "imagePullPolicy" "imagePullSecrets" "env" "resources" "tolerations" "affinity" "nodeSelector" "priorityClassName" "annotations" "podAnnotations" "labels" "logging" "upgradeCRD" "cleanupCRD" }}
  {{ $key }}: chart
  {{- end }}
daemonsets: {labels: operandLabels, annotations: set, tolerations: set, priorityClassName: set, updateStrategy: set, rollingUpdate: rollingUpdate}
validator:
  {{- toYaml (omit $image "enabled") | nindent 2 }}
  {{- range $key := list "plugin" "cuda" "driver" "toolkit" "vfioPCI" "vgpuManager" "vgpuDevices" }}
  {{ $key }}: envOnly
  {{- end }}
mig: {strategy: set}
psa: {enabled: always}
cdi: {enabled: always, nriPluginEnabled: nri}
hostPaths: {rootFS: always, driverInstallDir: always, kubeletRootDir: set}
driver:
  {{- toYaml $image | nindent 2 }}
  nvidiaDriverCRD: chart
  kernelModuleType: always
  usePrecompiled: always
  rdma: rdma
  manager: imageParts
  upgradePolicy: upgradePolicy
  {{- range $key := list "startupProbe" "livenessProbe" "readinessProbe" "repoConfig" "certConfig" "licensingConfig" "virtualTopology" "kernelModuleConfig" "secretEnv" }}
  {{ $key }}: set
  {{- end }}
vgpuManager:
  {{- toYaml $image | nindent 2 }}
  kernelModuleConfig: set
  driverManager: imageParts
kataManager:
  {{- toYaml $image | nindent 2 }}
  config: set
vfioManager:
  {{- toYaml $image | nindent 2 }}
  driverManager: imageParts
vgpuDeviceManager:
  {{- toYaml $image | nindent 2 }}
  config: set
ccManager:
  {{- toYaml $image | nindent 2 }}
  defaultMode: string
toolkit:
  {{- toYaml (omit $image "args") | nindent 2 }}
  installDir: set
devicePlugin:
  {{- toYaml $image | nindent 2 }}
  config: devicePluginConfig
  mps: dropped
draDriver:
  {{- range $key := list "featureGates" "imagePullSecrets" }}
  {{ $key }}: set
  {{- end }}
  {{- range $key := list "repository" "image" "version" "imagePullPolicy" "gpus" "computeDomains" }}
  {{ $key }}: dropped
  {{- end }}
dcgm:
  {{- toYaml $image | nindent 2 }}
dcgmExporter:
  {{- toYaml $image | nindent 2 }}
  config: dcgmExporterConfig
  {{- range $key := list "annotations" "serviceMonitor" "service" "hostPID" "hpcJobMapping" "enablePodLabels" "enablePodUID" "podLabelAllowlistRegex" }}
  {{ $key }}: set
  {{- end }}
gfd:
  {{- toYaml $image | nindent 2 }}
migManager:
  {{- toYaml $image | nindent 2 }}
  config: migManagerConfig
  gpuClientsConfig: set
nodeStatusExporter:
  {{- toYaml $image | nindent 2 }}
gds:
  {{- toYaml (omit $image "resources" "hostNetwork") | nindent 2 }}
gdrcopy:
  {{- toYaml (omit $image "resources" "hostNetwork") | nindent 2 }}
sandboxWorkloads: {enabled: always, defaultWorkload: set, mode: string}
sandboxDevicePlugin:
  {{- toYaml (merge (dict "enabled" "set") $image) | nindent 2 }}
kataSandboxDevicePlugin:
  {{- toYaml $image | nindent 2 }}
{{- end -}}

{{/*
The ClusterPolicy's spec (as JSON) from the values, by ocp-gpu.valueRules.  A section that ends
up empty is left out (the operator's and the CRD's defaults apply).
*/}}
{{- define "ocp-gpu.policySpec" -}}
{{- $rules := include "ocp-gpu.valueRules" . | fromYaml -}}
{{- $spec := dict -}}
{{- range $section := include "ocp-gpu.policySections" . | splitList " " -}}
{{- $values := index $.Values $section -}}
{{- if kindIs "map" $values -}}
{{- $sectionRules := index $rules $section | default dict -}}
{{- if and (has $section (list "validator" "nodeStatusExporter")) (eq (toString $values.repository) "nvcr.io/nvidia") (eq (toString $values.image) "gpu-operator") -}}
{{- /* NVIDIA's operator image stands for ours: the operator's own image is their default */ -}}
{{- $values = omit $values "repository" "image" "version" -}}
{{- end -}}
{{- /* NVIDIADriver mode: the NVIDIADriver carries the driver, the ClusterPolicy only these */ -}}
{{- $driverCR := and (eq $section "driver") (dig "nvidiaDriverCRD" "enabled" false $values) -}}
{{- $out := dict -}}
{{- range $key, $value := $values -}}
{{- $rule := index $sectionRules $key | default "copy" -}}
{{- if and $driverCR (ne $rule "copy") (not (has $key (list "enabled" "upgradePolicy" "hostNetwork"))) -}}
{{- $rule = "dropped" -}}
{{- end -}}
{{- if or (eq $rule "copy") (eq $rule "always") -}}
{{- $_ := set $out $key $value -}}
{{- else if eq $rule "set" -}}
{{- if $value }}{{ $_ := set $out $key $value }}{{ end -}}
{{- else if eq $rule "string" -}}
{{- if $value }}{{ $_ := set $out $key (toString $value) }}{{ end -}}
{{- else if eq $rule "metrics" -}}
{{- if and (kindIs "map" $value) $value.serviceMonitor }}{{ $_ := set $out $key (pick $value "serviceMonitor") }}{{ end -}}
{{- else if eq $rule "operandLabels" -}}
{{- /* written below, with the chart's own */ -}}
{{- else if eq $rule "rollingUpdate" -}}
{{- if $value }}{{ $_ := set $out $key (dict "maxUnavailable" (toString $value.maxUnavailable)) }}{{ end -}}
{{- else if eq $rule "envOnly" -}}
{{- if $value }}{{ $_ := set $out $key (dict "env" ($value.env | default list)) }}{{ end -}}
{{- else if eq $rule "nri" -}}
{{- if and $values.enabled $value }}{{ $_ := set $out $key $value }}{{ end -}}
{{- else if eq $rule "rdma" -}}
{{- $_ := set $out $key (dict "enabled" $value.enabled "useHostMofed" $value.useHostMofed) -}}
{{- else if eq $rule "imageParts" -}}
{{- $parts := dict -}}
{{- range $part := list "repository" "image" "imagePullPolicy" "env" -}}
{{- if index $value $part }}{{ $_ := set $parts $part (index $value $part) }}{{ end -}}
{{- end -}}
{{- if $value.version }}{{ $_ := set $parts "version" (toString $value.version) }}{{ end -}}
{{- $_ := set $out $key $parts -}}
{{- else if eq $rule "upgradePolicy" -}}
{{- if $value -}}
{{- $wait := $value.waitForCompletion | default dict -}}
{{- /* NVIDIA's chart reads gpuPodDeletion (the seed's name) and writes podDeletion (its CRD's); the CRD's own name, when given, wins */ -}}
{{- $deletion := merge (deepCopy ($value.podDeletion | default dict)) ($value.gpuPodDeletion | default dict) -}}
{{- $drain := $value.drain | default dict -}}
{{- $policy := dict "autoUpgrade" ($value.autoUpgrade | default false) "maxParallelUpgrades" ($value.maxParallelUpgrades | default 0) "maxUnavailable" ($value.maxUnavailable | default "25%") -}}
{{- $waitOut := pick $wait "timeoutSeconds" -}}
{{- if $wait.podSelector }}{{ $_ := set $waitOut "podSelector" $wait.podSelector }}{{ end -}}
{{- $deletionOut := merge (pick $deletion "timeoutSeconds") (dict "force" ($deletion.force | default false) "deleteEmptyDir" ($deletion.deleteEmptyDir | default false)) -}}
{{- $drainOut := merge (pick $drain "timeoutSeconds") (dict "enable" ($drain.enable | default false) "force" ($drain.force | default false) "deleteEmptyDir" ($drain.deleteEmptyDir | default false)) -}}
{{- if $drain.podSelector }}{{ $_ := set $drainOut "podSelector" $drain.podSelector }}{{ end -}}
{{- $_ := set $policy "waitForCompletion" $waitOut -}}
{{- $_ := set $policy "podDeletion" $deletionOut -}}
{{- $_ := set $policy "drain" $drainOut -}}
{{- $_ := set $out $key $policy -}}
{{- end -}}
{{- else if eq $rule "devicePluginConfig" -}}
{{- if and (kindIs "map" $value) $value.name }}{{ $_ := set $out $key (dict "name" (toString $value.name) "default" (toString ($value.default | default ""))) }}{{ end -}}
{{- else if eq $rule "migManagerConfig" -}}
{{- if $value -}}
{{- $config := dict "default" (toString ($value.default | default "")) -}}
{{- if $value.name }}{{ $_ := set $config "name" $value.name }}{{ end -}}
{{- $_ := set $out $key $config -}}
{{- end -}}
{{- else if eq $rule "dcgmExporterConfig" -}}
{{- if and (kindIs "map" $value) $value.name }}{{ $_ := set $out $key (dict "name" $value.name) }}{{ end -}}
{{- end -}}
{{- /* "chart" and "dropped": nothing */ -}}
{{- end -}}
{{- if eq $section "driver" -}}
{{- if kindIs "map" $values.nvidiaDriverCRD }}{{ $_ := set $out "useNvidiaDriverCRD" ($values.nvidiaDriverCRD.enabled | default false) }}{{ end -}}
{{- end -}}
{{- if eq $section "daemonsets" -}}
{{- $_ := set $out "labels" (merge (deepCopy ($values.labels | default dict)) (include "ocp-gpu.operandLabels" $ | fromYaml)) -}}
{{- end -}}
{{- if $out }}{{ $_ := set $spec $section $out }}{{ end -}}
{{- end -}}
{{- end -}}
{{- toJson $spec -}}
{{- end -}}

{{/* The chart's labels on the operands (the ClusterPolicy's daemonsets.labels), as NVIDIA's chart adds its own. */}}
{{- define "ocp-gpu.operandLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/managed-by: {{ .Chart.Name | quote }}
{{- end -}}

{{- define "ocp-gpu.labels" -}}
app.kubernetes.io/name: ocp-gpu
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- with (.Values.operator | default dict).labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The operator's image: operator.image alone when it is a full reference, else
<repository>/<image>:<version> as in NVIDIA's chart.  NVIDIA's own operator image (nvcr.io/nvidia
+ gpu-operator, NVIDIA's values.yaml default) stands for this chart's operator: ocp-gpu cannot
run as NVIDIA's image, so the release's image is used (ocp-gpu.releaseOperatorImage, generated in
operator.yaml).
*/}}
{{- define "ocp-gpu.operatorImage" -}}
{{- $operator := .Values.operator | default dict -}}
{{- $image := $operator.image | default "" | toString -}}
{{- $repository := $operator.repository | default "" | toString | trimSuffix "/" -}}
{{- if and (eq $repository "nvcr.io/nvidia") (eq $image "gpu-operator") -}}
{{- include "ocp-gpu.releaseOperatorImage" . -}}
{{- else if or (contains "@" $image) (contains ":" (last (splitList "/" $image))) (and (contains "/" $image) (not $repository)) -}}
{{- $image -}}
{{- else if and $repository $image -}}
{{- $version := $operator.version | default "" | toString -}}
{{- /* no version: the release's, as NVIDIA's chart takes its appVersion */ -}}
{{- $version := $version | default (include "ocp-gpu.releaseOperatorVersion" .) -}}
{{- printf "%s/%s%s%s" $repository $image (ternary "@" ":" (hasPrefix "sha256:" $version)) $version -}}
{{- else -}}
{{- include "ocp-gpu.releaseOperatorImage" . -}}
{{- end -}}
{{- end -}}
