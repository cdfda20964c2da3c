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

{{/* A memory quantity (512Mi, 1Gi, 1.5Gi, 800M, 536870912) in whole MiB. */}}
{{- define "krane.mebibytes" -}}
{{- $q := toString . -}}
{{- $units := list (list "Ki" 1024.0) (list "Mi" 1048576.0) (list "Gi" 1073741824.0) (list "Ti" 1099511627776.0) (list "k" 1000.0) (list "M" 1000000.0) (list "G" 1000000000.0) (list "T" 1000000000000.0) -}}
{{- $bytes := -1.0 -}}
{{- range $units -}}
{{- if and (lt $bytes 0.0) (hasSuffix (index . 0) $q) -}}
{{- $bytes = mulf (trimSuffix (index . 0) $q | float64) (index . 1) -}}
{{- end -}}
{{- end -}}
{{- if lt $bytes 0.0 -}}
{{- $bytes = $q | float64 -}}
{{- end -}}
{{- divf $bytes 1048576.0 | floor | int -}}
{{- end -}}

{{/*
The agent's V8 heap limit in MiB: agent.heapLimitMiB, or half of its memory limit. Refuses a
heap limit at or above the memory limit, and an agent without a memory limit.
*/}}
{{- define "krane.agentHeapMiB" -}}
{{- $limit := dig "limits" "memory" "" .Values.agent.resources -}}
{{- if not $limit -}}
{{- fail "agent.resources.limits.memory: the agent needs a memory limit (its V8 heap limit, agent.heapLimitMiB, is set below it)" -}}
{{- end -}}
{{- $limitMiB := include "krane.mebibytes" $limit | int -}}
{{- $heap := int .Values.agent.heapLimitMiB -}}
{{- if eq $heap 0 -}}
{{- $heap = div $limitMiB 2 -}}
{{- end -}}
{{- if ge $heap $limitMiB -}}
{{- fail (printf "agent.heapLimitMiB: %d MiB is not below agent.resources.limits.memory (%s = %d MiB); the kernel would kill the agent before V8 collects garbage" $heap (toString $limit) $limitMiB) -}}
{{- end -}}
{{- if lt $heap 64 -}}
{{- fail (printf "agent.heapLimitMiB: %d MiB is too small for the agent (at least 64; raise agent.resources.limits.memory or set agent.heapLimitMiB)" $heap) -}}
{{- end -}}
{{- $heap -}}
{{- end -}}

{{- /*
"true" when the cluster already has this fence object (a ValidatingAdmissionPolicy or its
binding) labelled app.kubernetes.io/managed-by=krane and owned by no Helm release: `krane
cluster up` and `kubectl apply -f deploy/rbac/` install it so. Empty otherwise, and always under
`helm template` and client-side dry runs, where lookup sees no cluster.
*/}}
{{- define "krane.preinstalledFence" -}}
{{- $live := lookup .apiVersion .kind "" .metadata.name }}
{{- if $live }}
{{- $labels := default (dict) $live.metadata.labels }}
{{- $annotations := default (dict) $live.metadata.annotations }}
{{- if and (eq (get $labels "app.kubernetes.io/managed-by") "krane") (not (hasKey $annotations "meta.helm.sh/release-name")) -}}
true
{{- end }}
{{- end }}
{{- end }}

{{- /* Non-empty when the agent's fence is on and the cluster had any of its objects already. */}}
{{- define "krane.fenceKept" -}}
{{- if and .Values.agent.enabled .Values.agent.fence.enabled }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" ($.Files.Get "files/fence.yaml") -1 }}
{{- $obj := fromYaml $doc }}
{{- if and $obj $obj.kind }}{{ include "krane.preinstalledFence" $obj }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
