package controller

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
)

// IndexPoolPolicy indexes InferencePools by the name of the SchedulerPolicy
// they refer to, so a policy finds its pools without listing them all.
const IndexPoolPolicy = "spec.schedulerPolicyRef.name"

// SetupIndexes registers the field indexes the reconcilers list by. It must
// run before the manager starts.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &servingv1alpha1.InferencePool{}, IndexPoolPolicy, poolPolicyName)
}

func poolPolicyName(obj client.Object) []string {
	pool, ok := obj.(*servingv1alpha1.InferencePool)
	if !ok || pool.Spec.SchedulerPolicyRef == nil {
		return nil
	}
	return []string{pool.Spec.SchedulerPolicyRef.Name}
}
