// Package v1alpha1 is the serving.kvpilot.dev/v1alpha1 API: InferencePool, a
// fleet of kvpilot runtime pods serving one model, and SchedulerPolicy, the
// program-level scheduling settings that pools refer to.
//
// +kubebuilder:object:generate=true
// +groupName=serving.kvpilot.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "serving.kvpilot.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
