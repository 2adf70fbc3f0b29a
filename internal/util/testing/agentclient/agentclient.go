// Package agentclient sends an agent's steps to a running runtime pod,
// for integration and end-to-end tests: each step of a program is one
// completion whose prompt extends the program's previous one.
package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Prompt is a program's context of n token ids: each program has its
// own (no prefix shared between programs), and each step's context extends
// the previous one, as an agent's conversation does.
func Prompt(program string, n int) []int32 {
	var h uint32 = 2166136261
	for i := 0; i < len(program); i++ {
		h = (h ^ uint32(program[i])) * 16777619
	}
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32((h + uint32(i)*2654435761) % 100000)
	}
	return prompt
}

// StepResult is one answered step.
type StepResult struct {
	// ServedBy is the pod that served it (X-Kvpilot-Served-By), empty when
	// the pod the request was sent to served it itself.
	ServedBy string
	// Tokens is the number of completion tokens.
	Tokens int
	// CachedTokens is the prompt tokens served from the prefix cache
	// (usage.prompt_tokens_details.cached_tokens), from either KV tier.
	CachedTokens int
}

// Step sends one step of program to the runtime API at addr
// (host:port): Prompt(program, promptLen) with maxTokens to generate
// (EOS ignored, so the count is exact). A non-200 answer is an error.
func Step(ctx context.Context, addr, program string, promptLen, maxTokens int) (StepResult, error) {
	body, err := json.Marshal(map[string]any{"prompt": Prompt(program, promptLen), "max_tokens": maxTokens, "ignore_eos": true})
	if err != nil {
		return StepResult{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return StepResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Program-Id", program)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return StepResult{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return StepResult{}, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var out struct {
		Usage struct {
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return StepResult{}, fmt.Errorf("decode %s: %w", b, err)
	}
	return StepResult{ServedBy: resp.Header.Get("X-Kvpilot-Served-By"), Tokens: out.Usage.CompletionTokens,
		CachedTokens: out.Usage.PromptTokensDetails.CachedTokens}, nil
}
