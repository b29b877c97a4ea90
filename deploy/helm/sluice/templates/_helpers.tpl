{{/* The chart's name, shortened to what Kubernetes allows. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's resource name. */}}
{{- define "sluice.fullname" -}}
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

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding SLUICE_MASTER_KEY and the other environment secrets. */}}
{{- define "sluice.secretName" -}}
{{- default (include "sluice.fullname" .) .Values.existingSecret }}
{{- end }}

{{/* True when the replicas share a PostgreSQL database. */}}
{{- define "sluice.hasDatabase" -}}
{{- if or .Values.database.url .Values.database.existingSecret }}true{{ end }}
{{- end }}

{{- define "sluice.hasRedis" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret }}true{{ end }}
{{- end }}

{{/* The SQLite store lives on a PersistentVolumeClaim: no database, persistence on. */}}
{{- define "sluice.usesClaim" -}}
{{- if and .Values.persistence.enabled (not (include "sluice.hasDatabase" .)) }}true{{ end }}
{{- end }}

{{/*
sluice's config.yaml: the user's `config` with the chart's references to its Secret merged in
(master key, database, Redis). The values themselves never appear in the ConfigMap.
*/}}
{{- define "sluice.config" -}}
{{- $config := deepCopy (default dict .Values.config) }}
{{- $general := default dict (get $config "general_settings") }}
{{- $_ := set $general "master_key" "os.environ/SLUICE_MASTER_KEY" }}
{{- if include "sluice.hasDatabase" . }}
{{- $_ := set $general "database_url" "os.environ/DATABASE_URL" }}
{{- end }}
{{- $_ := set $config "general_settings" $general }}
{{- if include "sluice.hasRedis" . }}
{{- $router := default dict (get $config "router_settings") }}
{{- $_ := set $router "redis_url" "os.environ/REDIS_URL" }}
{{- $_ := set $config "router_settings" $router }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* Refuse settings that cannot work, with the reason. */}}
{{- define "sluice.validate" -}}
{{- $fleet := or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled }}
{{- if and $fleet (not (include "sluice.hasDatabase" .)) }}
{{- fail "several replicas (replicaCount > 1 or autoscaling.enabled) need database.url or database.existingSecret: the SQLite file belongs to one pod" }}
{{- end }}
{{- if lt (int .Values.shutdown.graceSeconds) 0 }}
{{- fail "shutdown.graceSeconds must be 0 or more" }}
{{- end }}
{{- end }}
