package controller

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	servingv1alpha1 "github.com/kvpilot/kvpilot/api/v1alpha1"
)

// The Secret keys of S3 credentials (model.fetch.s3.credentialsSecretRef),
// which are also the environment variables the fetch mode reads.
const (
	envAWSAccessKeyID     = "AWS_ACCESS_KEY_ID"
	envAWSSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	envAWSSessionToken    = "AWS_SESSION_TOKEN"
	envHFToken            = "HF_TOKEN"
)

// modelCacheVolume is the volume a url source is fetched into: the named
// claim, shared by the pool's pods, or an emptyDir of the pod's own.
func modelCacheVolume(f *servingv1alpha1.ModelFetch) *corev1.Volume {
	v := &corev1.Volume{Name: volumeModelCache}
	if f != nil && f.Cache != nil && f.Cache.PersistentVolumeClaim != nil {
		v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: f.Cache.PersistentVolumeClaim.ClaimName}
		return v
	}
	v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	if f != nil && f.Cache != nil {
		v.EmptyDir.SizeLimit = f.Cache.SizeLimit
	}
	return v
}

// fetchContainer is the init container that downloads a url source into
// the cache volume with the runtime's fetch mode, from the same image, so
// the runtime container starts with the model in place. Secrets reach it
// as environment variables; the runtime container never sees them.
func fetchContainer(spec *servingv1alpha1.InferencePoolSpec, image string) corev1.Container {
	url := spec.Model.Source.URL
	// The progress is served on the control port, which the runtime takes
	// over once the init container is done: the controller reads it there
	// (fetchProgress) and the pod needs no API access to report it.
	args := []string{"fetch", "--url=" + url, "--cache-dir=" + modelCacheMountPath, "--progress-addr=:" + strconv.Itoa(controlPort)}
	var env []corev1.EnvVar
	secretEnv := func(name, secret, key string, optional bool) {
		ref := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}
		if optional {
			ref.Optional = &optional
		}
		env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}})
	}
	if f := spec.Model.Fetch; f != nil {
		if f.HFEndpoint != "" {
			args = append(args, "--hf-endpoint="+f.HFEndpoint)
		}
		if ref := f.HFTokenSecretRef; ref != nil {
			key := ref.Key
			if key == "" {
				key = "token"
			}
			secretEnv(envHFToken, ref.Name, key, false)
		}
		if s3 := f.S3; s3 != nil {
			if s3.Endpoint != "" {
				args = append(args, "--s3-endpoint="+s3.Endpoint)
			}
			if s3.Region != "" {
				args = append(args, "--s3-region="+s3.Region)
			}
			if ref := s3.CredentialsSecretRef; ref != nil {
				secretEnv(envAWSAccessKeyID, ref.Name, envAWSAccessKeyID, false)
				secretEnv(envAWSSecretAccessKey, ref.Name, envAWSSecretAccessKey, false)
				secretEnv(envAWSSessionToken, ref.Name, envAWSSessionToken, true)
			}
		}
	}
	return corev1.Container{
		Name:            fetchContainerName,
		Image:           image,
		ImagePullPolicy: spec.ImagePullPolicy,
		Command:         []string{runtimeCommand},
		Args:            args,
		Env:             env,
		VolumeMounts: []corev1.VolumeMount{
			{Name: volumeModelCache, MountPath: modelCacheMountPath},
			// Go's TLS roots and temp files need nothing else; a tmp mount
			// keeps a read-only root usable for libraries that write there.
			{Name: volumeTmp, MountPath: tmpMountPath},
		},
		SecurityContext:          containerSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}
