{{/* Labels every object carries (the same as deploy/*.yaml). */}}
{{- define "starforge.labels" -}}
app.kubernetes.io/name: starforge
{{- end }}

{{/* The storage PVC's name: FORGE_K8S_STORAGE_PVC. */}}
{{- define "starforge.storagePvc" -}}
{{- required "settings.FORGE_K8S_STORAGE_PVC must name the storage PVC" .Values.settings.FORGE_K8S_STORAGE_PVC -}}
{{- end }}
