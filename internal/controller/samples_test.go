package controller_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The samples are documentation people copy: the API server must accept
// every one of them as written.
var _ = Describe("config/samples", func() {
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		panic("no samples found in config/samples")
	}
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		It("accepts "+filepath.Base(file), func(ctx SpecContext) {
			ns := newNamespace(ctx)
			f, err := os.Open(file)
			Expect(err).NotTo(HaveOccurred())
			defer f.Close()
			dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
			for {
				obj := &unstructured.Unstructured{}
				err := dec.Decode(&obj.Object)
				if errors.Is(err, io.EOF) {
					break
				}
				Expect(err).NotTo(HaveOccurred())
				if len(obj.Object) == 0 {
					continue
				}
				obj.SetNamespace(ns)
				Expect(k8sClient.Create(ctx, obj, client.DryRunAll)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
			}
		})
	}
})
