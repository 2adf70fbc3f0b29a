package controller_test

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kvpilot/kvpilot/test/docs"
)

// The YAML in the README and the user docs is what people copy first: the
// API server must accept every whole object there as written, with no
// misspelt field (strict field validation refuses what it would drop).
// Fragments (a spec excerpt without apiVersion and kind) are not objects
// and are left out.
// wholeObject matches YAML that names its apiVersion and kind.
var wholeObject = regexp.MustCompile(`(?ms)^apiVersion: .*^kind: |^kind: .*^apiVersion: `)

var _ = Describe("YAML in README.md and docs/", func() {
	root := docs.RepoRoot()
	files := []string{filepath.Join(root, "README.md")}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		panic(err)
	}
	files = append(files, more...)
	found := 0
	for _, file := range files {
		blocks, err := docs.FencedBlocks(file)
		if err != nil {
			panic(err)
		}
		for _, b := range blocks {
			if b.Lang != "yaml" || !wholeObject.MatchString(b.Text) {
				continue
			}
			found++
			rel, _ := filepath.Rel(root, file)
			It(fmt.Sprintf("accepts the objects of %s at line %d", rel, b.Line), func(ctx SpecContext) {
				Expect(dryRunCreate(ctx, strings.NewReader(b.Text), newNamespace(ctx))).To(BeNumerically(">", 0))
			})
		}
	}
	if found == 0 {
		panic("no YAML objects found in README.md or docs/: the README must show an InferencePool")
	}
})

// dryRunCreate creates every object of a YAML stream in namespace ns with
// a server-side dry run and strict field validation (a misspelt field is
// an error, not dropped), and returns how many there were.
func dryRunCreate(ctx SpecContext, r io.Reader, ns string) int {
	dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
	objects := 0
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objects
		}
		Expect(err).NotTo(HaveOccurred())
		if len(obj.Object) == 0 {
			continue
		}
		obj.SetNamespace(ns)
		Expect(k8sClient.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict"))).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
		objects++
	}
}
