{{/* Names, labels, the image, and what the configs may need (MIG, MPS, CDI), shared by every template. */}}

{{- define "gpuslice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release name, or release-name: the prefix of every object's name. */}}
{{- define "gpuslice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpuslice.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{/* Labels of every object; pass (dict "root" $ "component" "device-plugin"). */}}
{{- define "gpuslice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gpuslice.selectorLabels" . | trim }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{/* A DaemonSet's selector: the override (or name and instance) and always the component. */}}
{{- define "gpuslice.selectorLabels" -}}
{{- if .root.Values.selectorLabelsOverride }}
{{- toYaml .root.Values.selectorLabelsOverride }}
{{- else }}
app.kubernetes.io/name: {{ include "gpuslice.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/* registry/name@digest, or registry/name:tag (default the appVersion); never latest. */}}
{{- define "gpuslice.image" -}}
{{- $image := .Values.image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (toString (default .Chart.AppVersion $image.tag)) }}
{{- end }}
{{- end }}

{{- define "gpuslice.configMapName" -}}
{{- default (printf "%s-config" (include "gpuslice.fullname" .)) .Values.config.name }}
{{- end }}

{{/* "true" when the node label picks among named configs (config.name or config.map). */}}
{{- define "gpuslice.perNodeConfigs" -}}
{{- if or .Values.config.name .Values.config.map }}true{{ end }}
{{- end }}

{{/* "true" when some config may use MIG: an external ConfigMap could; else migStrategy or any map entry. */}}
{{- define "gpuslice.migPossible" -}}
{{- if kindIs "string" .Values.migStrategy }}
{{- if ne .Values.migStrategy "none" }}true{{ end }}
{{- else if .Values.config.name }}true
{{- else }}
{{- range $key, $text := .Values.config.map }}
{{- $flags := (fromYaml $text).flags | default dict }}
{{- if ne (toString ($flags.migStrategy | default "none")) "none" }}true{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/* "true" when some config may use MPS: an external ConfigMap could; else a map entry with MPS resources.
An entry `mps: null` shares nothing, as in NVIDIA's plugin. */}}
{{- define "gpuslice.mpsPossible" -}}
{{- if .Values.config.name }}true
{{- else }}
{{- range $key, $text := .Values.config.map }}
{{- $sharing := (fromYaml $text).sharing | default dict }}
{{- $mps := $sharing.mps | default dict }}
{{- if $mps.resources }}true{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/* "true" when devices may be handed over as CDI: the plugin then writes specs to /var/run/cdi. */}}
{{- define "gpuslice.cdiPossible" -}}
{{- if kindIs "string" .Values.deviceListStrategy }}
{{- if contains "cdi" .Values.deviceListStrategy }}true{{ end }}
{{- else if .Values.config.name }}true
{{- else }}
{{- range $key, $text := .Values.config.map }}
{{- $flags := (fromYaml $text).flags | default dict }}
{{- $plugin := $flags.plugin | default dict }}
{{- if contains "cdi" (toString $plugin.deviceListStrategy) }}true{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Pod annotations: the user's, plus a checksum of the chart's own ConfigMap so a config change rolls. */}}
{{- define "gpuslice.podAnnotations" -}}
{{- $annotations := deepCopy .Values.podAnnotations }}
{{- if not .Values.config.name }}
{{- $_ := set $annotations "checksum/config" (include (print .Template.BasePath "/configmap.yaml") . | sha256sum) }}
{{- end }}
{{- toYaml $annotations }}
{{- end }}

{{/* Pod-level settings every DaemonSet shares; pass (dict "root" $ "hostNetwork" bool "serviceAccount" name). */}}
{{- define "gpuslice.podSpec" -}}
{{- $v := .root.Values }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.runtimeClassName }}
runtimeClassName: {{ . }}
{{- end }}
serviceAccountName: {{ .serviceAccount }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .hostNetwork }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- if $v.podSecurityContext }}
  {{- toYaml $v.podSecurityContext | nindent 2 }}
  {{- else }}
  seccompProfile:
    type: RuntimeDefault
  {{- end }}
{{- end }}

{{/* A container's resources: its component's, else the top-level value, else the chart's default. */}}
{{- define "gpuslice.resources" -}}
{{- toYaml (.component | default .root.Values.resources | default .default) }}
{{- end }}

{{/* Environment for the NVIDIA flags that are set (null: unset), in the form each front end reads. */}}
{{- define "gpuslice.flagEnv" -}}
{{- $v := .Values }}
{{- if kindIs "string" $v.migStrategy }}
- name: MIG_STRATEGY
  value: {{ $v.migStrategy | quote }}
{{- end }}
{{- if kindIs "bool" $v.failOnInitError }}
- name: FAIL_ON_INIT_ERROR
  value: {{ $v.failOnInitError | quote }}
{{- end }}
{{- if kindIs "string" $v.nvidiaDriverRoot }}
- name: NVIDIA_DRIVER_ROOT
  value: {{ $v.nvidiaDriverRoot | quote }}
{{- end }}
{{- end }}

{{/* The device plugin's (and DRA plugin's) further NVIDIA flags. */}}
{{- define "gpuslice.pluginFlagEnv" -}}
{{- $v := .Values }}
{{- include "gpuslice.flagEnv" . }}
{{- if kindIs "bool" $v.compatWithCPUManager }}
- name: PASS_DEVICE_SPECS
  value: {{ $v.compatWithCPUManager | quote }}
{{- end }}
{{- if kindIs "string" $v.deviceListStrategy }}
- name: DEVICE_LIST_STRATEGY
  value: {{ $v.deviceListStrategy | quote }}
{{- end }}
{{- if kindIs "string" $v.deviceIDStrategy }}
- name: DEVICE_ID_STRATEGY
  value: {{ $v.deviceIDStrategy | quote }}
{{- end }}
{{- if kindIs "string" $v.nvidiaDevRoot }}
- name: NVIDIA_DEV_ROOT
  value: {{ $v.nvidiaDevRoot | quote }}
{{- end }}
{{- range $key, $name := dict "gdrcopyEnabled" "GDRCOPY_ENABLED" "gdsEnabled" "GDS_ENABLED" "mofedEnabled" "MOFED_ENABLED" }}
{{- if kindIs "bool" (get $v $key) }}
- name: {{ $name }}
  value: {{ get $v $key | quote }}
{{- end }}
{{- end }}
{{- if kindIs "string" $v.deviceDiscoveryStrategy }}
- name: DEVICE_DISCOVERY_STRATEGY
  value: {{ $v.deviceDiscoveryStrategy | quote }}
{{- end }}
{{- if kindIs "string" $v.cdi.nvidiaHookPath }}
- name: NVIDIA_CDI_HOOK_PATH
  value: {{ $v.cdi.nvidiaHookPath | quote }}
{{- end }}
{{- if kindIs "string" $v.cdi.featureFlags }}
- name: CDI_FEATURE_FLAGS
  value: {{ $v.cdi.featureFlags | quote }}
{{- end }}
{{- end }}

{{/* How a container finds its config: one file, or the node label over the named configs. */}}
{{- define "gpuslice.configEnv" -}}
{{- if include "gpuslice.perNodeConfigs" . }}
- name: CONFIG_FILE_SRCDIR
  value: /config
- name: NODE_LABEL
  value: nvidia.com/device-plugin.config
{{- with .Values.config.default }}
- name: DEFAULT_CONFIG
  value: {{ . | quote }}
{{- end }}
- name: FALLBACK_STRATEGIES
  value: {{ join "," .Values.config.fallbackStrategies | quote }}
{{- else }}
- name: CONFIG_FILE
  value: /config/config.yaml
{{- end }}
{{- end }}

{{/* The driver root volume, when nvidiaDriverRoot is set. */}}
{{- define "gpuslice.driverRootMounts" -}}
{{- if kindIs "string" .Values.nvidiaDriverRoot }}
# /driver-root is where CDI specs say the driver is inside the container (containerDriverRoot); gpuslice
# also reads the driver's files at NVIDIA_DRIVER_ROOT itself, so the root is mounted there too.
- name: driver-root
  mountPath: /driver-root
  readOnly: true
{{- if ne (clean .Values.nvidiaDriverRoot) "/" }}
- name: driver-root
  mountPath: {{ clean .Values.nvidiaDriverRoot }}
  readOnly: true
{{- end }}
{{- end }}
{{- end }}

{{- define "gpuslice.driverRootVolume" -}}
{{- if kindIs "string" .Values.nvidiaDriverRoot }}
- name: driver-root
  hostPath:
    path: {{ clean .Values.nvidiaDriverRoot }}
    type: Directory
{{- end }}
{{- end }}

{{/* A container's env: the chart's entries, each replaced by an `extra` entry of the same name, then the rest. */}}
{{- define "gpuslice.mergeEnv" -}}
{{- $extra := dict }}
{{- range .extra }}{{ $_ := set $extra .name . }}{{ end }}
{{- $out := list }}
{{- range (fromYamlArray .env) }}
{{- $out = append $out (get $extra .name | default .) }}
{{- $_ := unset $extra .name }}
{{- end }}
{{- range .extra }}
{{- if hasKey $extra .name }}{{ $out = append $out . }}{{ end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* updateStrategy, with maxUnavailable 1 written out for RollingUpdate; rollingUpdate only with that type. */}}
{{- define "gpuslice.updateStrategy" -}}
{{- $strategy := deepCopy (.Values.updateStrategy | default dict) }}
{{- if eq (toString ($strategy.type | default "RollingUpdate")) "RollingUpdate" }}
{{- $_ := set $strategy "type" "RollingUpdate" }}
{{- if not $strategy.rollingUpdate }}
{{- $_ := set $strategy "rollingUpdate" (dict "maxUnavailable" 1) }}
{{- end }}
{{- else }}
{{- $_ := unset $strategy "rollingUpdate" }}
{{- end }}
{{- toYaml $strategy }}
{{- end }}
