{{/* Names, labels and shared pieces of the krane chart. */}}

{{- define "krane.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "krane.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component (ctrl or agent). */}}
{{- define "krane.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "krane.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "krane.ctrlScheme" -}}
{{- if .Values.ctrl.tls.secretName }}https{{ else }}http{{ end -}}
{{- end -}}

{{/* The URL the agent uses for ctrl: the value, or this release's ctrl Service. */}}
{{- define "krane.ctrlUrl" -}}
{{- if .Values.agent.ctrlUrl -}}
{{- .Values.agent.ctrlUrl -}}
{{- else -}}
{{- printf "%s://%s-ctrl.%s.svc:%d" (include "krane.ctrlScheme" .) (include "krane.fullname" .) .Release.Namespace (int .Values.ctrl.service.port) -}}
{{- end -}}
{{- end -}}

{{/* Secret name and key of the admin token and of the database URL. */}}
{{- define "krane.adminTokenSecret" -}}
{{- default (printf "%s-ctrl" (include "krane.fullname" .)) .Values.ctrl.adminToken.existingSecret -}}
{{- end -}}
{{- define "krane.databaseSecret" -}}
{{- default (printf "%s-ctrl" (include "krane.fullname" .)) .Values.ctrl.database.postgres.existingSecret -}}
{{- end -}}
{{- define "krane.databaseKey" -}}
{{- if .Values.ctrl.database.postgres.existingSecret }}{{ .Values.ctrl.database.postgres.urlKey }}{{ else }}database-url{{ end -}}
{{- end -}}
{{- define "krane.agentTokenSecret" -}}
{{- default (printf "%s-agent" (include "krane.fullname" .)) .Values.agent.token.existingSecret -}}
{{- end -}}

{{/* What every krane container runs with: no root, no privilege, nothing written outside /tmp and its volumes. */}}
{{- define "krane.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- define "krane.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
