package controller_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The samples are documentation people copy: the API server must accept
// every one of them as written, with no field it would drop.
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
			f, err := os.Open(file)
			Expect(err).NotTo(HaveOccurred())
			defer f.Close()
			dryRunCreate(ctx, f, newNamespace(ctx))
		})
	}
})
