// Package helm holds the checks of kvpilot's Helm chart (charts/kvpilot)
// against the kustomize config it mirrors (config/): helm lint, the chart
// rendered with default values against `kustomize build config/default`
// object for object, and, on an envtest kube-apiserver, helm install,
// upgrade and uninstall, then the rendered objects applied with a
// server-side dry run. The chart's CRDs and manager role are generated
// from config/ by hack/helm-chart.sh; these tests catch the rest of the
// chart drifting from config/.
//
// They need helm (KVPILOT_HELM), kustomize (KVPILOT_KUSTOMIZE, else
// `kubectl kustomize`; `make test` builds both into bin/), and the envtest
// binaries (KUBEBUILDER_ASSETS). Without them they skip, saying why, unless
// KVPILOT_REQUIRE_HELM (and for the dry run KVPILOT_REQUIRE_ENVTEST) is
// set, as `make test` sets them.
package helm
