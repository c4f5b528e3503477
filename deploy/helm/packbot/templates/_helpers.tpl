{{/* The release's name for packbot objects, at most 63 characters. */}}
{{- define "packbot.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "packbot.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "packbot.labels" -}}
{{ include "packbot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* One environment variable from a Secret reference {name, key}, when the name is set. */}}
{{- define "packbot.secretEnv" -}}
{{- $ref := index . 1 -}}
{{- if $ref.name }}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name }}
      key: {{ $ref.key }}
{{- end }}
{{- end -}}

{{/* Refuse values that cannot run, with the fix. */}}
{{- define "packbot.check" -}}
{{- $postgres := or .Values.database.urlSecret.name .Values.database.host -}}
{{- if and (gt (int .Values.replicaCount) 1) (not $postgres) -}}
{{- fail "replicaCount > 1 needs PostgreSQL: set database.host (and database.passwordSecret) or database.urlSecret; SQLite is for one process" -}}
{{- end -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.secrets.didcommKey.name) -}}
{{- fail "replicaCount > 1 needs secrets.didcommKey: every replica must be the same DIDComm agent (a Secret holding 64 hex characters: packbot keys gen)" -}}
{{- end -}}
{{- if and .Values.vsAgent.adminUrl (not .Values.secrets.webhookSecret.name) -}}
{{- fail "vsAgent.adminUrl needs secrets.webhookSecret: the VS Agent's webhooks must carry a secret (a Secret holding at least 16 letters or digits)" -}}
{{- end -}}
{{- end -}}
