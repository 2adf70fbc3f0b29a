package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
)

// controlTokenBytes is the entropy of a control-API token.
const controlTokenBytes = 32

// ensureControlSecret creates the Secret holding the bearer token of the
// pool's control API (the API the fleet loop uses to read and place
// programs) unless it exists. The token is made once and never rotated by
// reconciling: rotating it would cut the controller off from running pods
// until they restarted. The Secret is immutable so nobody rotates it by
// accident either; deleting it (pods then fail to start) makes a new one.
func (r *InferencePoolReconciler) ensureControlSecret(ctx context.Context, pool *servingv1alpha1.InferencePool) (created bool, _ error) {
	name := ControlSecretName(pool.Name)
	switch err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: pool.Namespace, Name: name}, &corev1.Secret{}); {
	case err == nil:
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("get Secret %s: %w", name, err)
	}
	token := make([]byte, controlTokenBytes)
	if _, err := rand.Read(token); err != nil {
		return false, fmt.Errorf("generate control token: %w", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: pool.Namespace,
			Labels:    poolLabels(pool.Name),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         servingv1alpha1.GroupVersion.String(),
				Kind:               "InferencePool",
				Name:               pool.Name,
				UID:                pool.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: ptr.To(true),
		Data:      map[string][]byte{controlTokenKey: []byte(hex.EncodeToString(token))},
	}
	if err := r.Client.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return false, fmt.Errorf("create Secret %s: %w", name, err)
	}
	return true, nil
}
