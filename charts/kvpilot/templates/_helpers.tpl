{{/*
The chart name, or nameOverride: the app.kubernetes.io/name label.
*/}}
{{- define "kvpilot.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name, as config/default's namePrefix
("kvpilot-") makes them: the release name where it contains the chart name,
else "<release>-<chart>". Object names add a suffix, so it is kept to 40
characters.
*/}}
{{- define "kvpilot.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := include "kvpilot.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The manager's Deployment and ServiceAccount name.
*/}}
{{- define "kvpilot.manager" -}}
{{- include "kvpilot.fullname" . }}-controller-manager
{{- end }}

{{/*
Labels of every object: config/'s app.kubernetes.io/name, and Helm's own.
*/}}
{{- define "kvpilot.labels" -}}
app.kubernetes.io/name: {{ include "kvpilot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The manager pods' labels, its Deployment's and Service's selector: the
same as config/manager's, so a kustomize install and a chart install select
the same pods.
*/}}
{{- define "kvpilot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kvpilot.name" . }}
control-plane: controller-manager
{{- end }}

{{/*
The manager's image; the runtime pods use it too unless runtimeImage is set.
*/}}
{{- define "kvpilot.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
