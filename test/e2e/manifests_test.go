//go:build e2e

package e2e

import (
	"cmp"
	"fmt"
	"strings"
)

// simPool is an InferencePool of two pods of the sim executor (its
// defaults: an H100-SXM serving llama-3.1-8b, the built-in tiny model
// giving the tokenizer) that drain for 2 s after SIGTERM.
type simPool struct {
	name string
	// kvBlocks, when set, sizes each pod's device KV cache in blocks of
	// 16 tokens, and hostBlocks its host KV tier.
	kvBlocks, hostBlocks int
	// policy, when set, names the pool's SchedulerPolicy, a ProgramAware
	// one that runs a round every second, with policySpec (YAML lines
	// indented two spaces) added to its spec.
	policy, policySpec string
	// replicas, when set, replaces the default of two pods; gpus, when
	// set, asks each pod for that many nvidia.com/gpu.
	replicas, gpus int
}

// manifest is the YAML of the pool and its policy, as a user writes it.
func (p simPool) manifest() string {
	var b strings.Builder
	if p.policy != "" {
		fmt.Fprintf(&b, `
apiVersion: serving.kvpilot.dev/v1alpha1
kind: SchedulerPolicy
metadata:
  name: %s
spec:
  mode: ProgramAware
  interval: 1s
%s---`, p.policy, p.policySpec)
	}
	fmt.Fprintf(&b, `
apiVersion: serving.kvpilot.dev/v1alpha1
kind: InferencePool
metadata:
  name: %s
spec:
  replicas: %d
  model:
    name: llama-3.1-8b
    source:
      builtin: tiny
  executor:
    type: Sim
  engine:
    drainTimeout: 2s
`, p.name, cmp.Or(p.replicas, 2))
	if p.kvBlocks > 0 {
		fmt.Fprintf(&b, "    blockSize: 16\n    kvCacheBlocks: %d\n", p.kvBlocks)
	}
	if p.hostBlocks > 0 {
		fmt.Fprintf(&b, "    kvHostBlocks: %d\n", p.hostBlocks)
	}
	if p.gpus > 0 {
		fmt.Fprintf(&b, "  resources:\n    accelerators: %d\n", p.gpus)
	}
	if p.policy != "" {
		fmt.Fprintf(&b, "  schedulerPolicyRef:\n    name: %s\n", p.policy)
	}
	return b.String()
}
