package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvpilot/kvpilot/internal/runtime/device"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

func TestCompletion(t *testing.T) {
	env := newEnv(t, envOpts{})
	r := env.post("/v1/completions", `{"model":"test-model","prompt":[1,2,3,4,5],"max_tokens":7,"seed":1}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var resp openai.CompletionResponse
	decodeStrict(t, r.body, &resp)
	if resp.Object != openai.ObjectCompletion || resp.Model != testModel || !strings.HasPrefix(resp.ID, "cmpl-") {
		t.Errorf("response header fields: %+v", resp)
	}
	if len(resp.Choices) != 1 || *resp.Choices[0].FinishReason != "length" || resp.Choices[0].Text == "" {
		t.Fatalf("choices: %+v", resp.Choices)
	}
	want := openai.Usage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12} // no cached_tokens: --enable-prompt-tokens-details is off
	if d := cmp.Diff(want, *resp.Usage); d != "" {
		t.Errorf("usage (-want +got):\n%s", d)
	}
	if got := len(strings.Fields(resp.Choices[0].Text)); got != 7 {
		t.Errorf("text %q has %d sim words, want 7", resp.Choices[0].Text, got)
	}
	if r.header.Get("X-Request-Id") != resp.ID {
		t.Errorf("X-Request-Id %q, want %q", r.header.Get("X-Request-Id"), resp.ID)
	}
}

func TestChatCompletion(t *testing.T) {
	env := newEnv(t, envOpts{})
	r := env.post("/v1/chat/completions", `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"}],"max_completion_tokens":5}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var resp openai.ChatResponse
	decodeStrict(t, r.body, &resp)
	if resp.Object != openai.ObjectChatCompletion || !strings.HasPrefix(resp.ID, "chatcmpl-") {
		t.Errorf("response: %+v", resp)
	}
	c := resp.Choices[0]
	if c.Message.Role != "assistant" || c.Message.Content == "" || *c.FinishReason != "length" {
		t.Errorf("choice: %+v", c)
	}
	// "system: be brief\nuser: hello there\nassistant:" is 7 sim words.
	if resp.Usage.PromptTokens != 7 || resp.Usage.CompletionTokens != 5 {
		t.Errorf("usage: %+v", resp.Usage)
	}
}

// streamRequest posts a streaming request and returns its events.
func (e *testEnv) streamRequest(path, body string) []string {
	e.t.Helper()
	resp, cancel := e.openStream(path, body)
	defer cancel()
	return readEvents(e.t, resp.Body)
}

// openStream posts a streaming request and checks its status and
// Content-Type; cancel closes it.
func (e *testEnv) openStream(path, body string, header ...string) (resp *http.Response, cancel func()) {
	e.t.Helper()
	ctx, cancelCtx := context.WithTimeout(context.Background(), requestTimeout)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.ts.URL+path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		cancelCtx()
		e.t.Fatal(err)
	}
	cancel = func() { resp.Body.Close(); cancelCtx() }
	if resp.StatusCode != http.StatusOK {
		cancel()
		e.t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		e.t.Errorf("Content-Type %q", ct)
	}
	return resp, cancel
}

func TestCompletionStream(t *testing.T) {
	env := newEnv(t, envOpts{})
	for _, includeUsage := range []bool{false, true} {
		t.Run(fmt.Sprint("include_usage=", includeUsage), func(t *testing.T) {
			body := fmt.Sprintf(`{"prompt":"one two three","max_tokens":20,"seed":3,"stream":true,"stream_options":{"include_usage":%t}}`, includeUsage)
			events := env.streamRequest("/v1/completions", body)
			if events[len(events)-1] != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", events[len(events)-1])
			}
			events = events[:len(events)-1]
			var text strings.Builder
			var finish []string
			var usage *openai.Usage
			for i, ev := range events {
				var c openai.CompletionResponse
				decodeStrict(t, []byte(ev), &c)
				if c.Object != openai.ObjectCompletion || c.Model != testModel {
					t.Errorf("event %d: %s", i, ev)
				}
				if includeUsage != strings.Contains(ev, `"usage"`) {
					t.Errorf("event %d: usage field present=%t with include_usage=%t", i, !includeUsage, includeUsage)
				}
				if c.Usage != nil {
					if i != len(events)-1 || len(c.Choices) != 0 {
						t.Errorf("usage chunk %d of %d with %d choices", i, len(events), len(c.Choices))
					}
					usage = c.Usage
					continue
				}
				text.WriteString(c.Choices[0].Text)
				if fr := c.Choices[0].FinishReason; fr != nil {
					finish = append(finish, *fr)
				}
			}
			if d := cmp.Diff([]string{"length"}, finish); d != "" {
				t.Errorf("finish reasons (-want +got):\n%s", d)
			}
			if includeUsage && (usage == nil || usage.PromptTokens != 3 || usage.CompletionTokens != 20 || usage.TotalTokens != 23) {
				t.Errorf("usage %+v, want 3 + 20", usage)
			}
			// The same request without streaming yields the same text.
			r := env.post("/v1/completions", `{"prompt":"one two three","max_tokens":20,"seed":3}`)
			var whole openai.CompletionResponse
			decodeStrict(t, r.body, &whole)
			if whole.Choices[0].Text != text.String() {
				t.Errorf("streamed %q, non-streamed %q", text.String(), whole.Choices[0].Text)
			}
		})
	}
}

func TestChatStream(t *testing.T) {
	env := newEnv(t, envOpts{})
	events := env.streamRequest("/v1/chat/completions",
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("last event %q", events[len(events)-1])
	}
	events = events[:len(events)-1]
	var first openai.ChatChunk
	decodeStrict(t, []byte(events[0]), &first)
	if first.Choices[0].Delta.Role != "assistant" || first.Object != openai.ObjectChatChunk {
		t.Errorf("first chunk %s: want the assistant role", events[0])
	}
	var content strings.Builder
	var finish string
	for _, ev := range events[1 : len(events)-1] {
		var c openai.ChatChunk
		decodeStrict(t, []byte(ev), &c)
		if c.Choices[0].Delta.Content != nil {
			content.WriteString(*c.Choices[0].Delta.Content)
		}
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	var last openai.ChatChunk
	decodeStrict(t, []byte(events[len(events)-1]), &last)
	if finish != "length" || len(strings.Fields(content.String())) != 10 {
		t.Errorf("finish %q, content %q", finish, content.String())
	}
	if last.Usage == nil || last.Usage.CompletionTokens != 10 || len(last.Choices) != 0 {
		t.Errorf("usage chunk %s", events[len(events)-1])
	}
}

func TestStopStrings(t *testing.T) {
	env := newEnv(t, envOpts{})
	full := env.post("/v1/completions", `{"prompt":"a b c","max_tokens":30,"seed":9}`)
	var resp openai.CompletionResponse
	decodeStrict(t, full.body, &resp)
	words := strings.Fields(resp.Choices[0].Text)
	stop := " " + words[10]
	wantText, _, _ := strings.Cut(resp.Choices[0].Text, stop)

	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"prompt":"a b c","max_tokens":30,"seed":9,"stop":%q,"stream":%t}`, stop, stream)
		var text, finish string
		if stream {
			for _, ev := range env.streamRequest("/v1/completions", body) {
				if ev == "[DONE]" {
					continue
				}
				var c openai.CompletionResponse
				decodeStrict(t, []byte(ev), &c)
				text += c.Choices[0].Text
				if c.Choices[0].FinishReason != nil {
					finish = *c.Choices[0].FinishReason
				}
			}
		} else {
			r := env.post("/v1/completions", body)
			var c openai.CompletionResponse
			decodeStrict(t, r.body, &c)
			text, finish = c.Choices[0].Text, *c.Choices[0].FinishReason
		}
		if text != wantText || finish != "stop" {
			t.Errorf("stream=%t: text %q finish %q; want %q stop", stream, text, finish, wantText)
		}
	}
}

func TestDefaultStopStrings(t *testing.T) {
	probe := newEnv(t, envOpts{})
	var resp openai.CompletionResponse
	decodeStrict(t, probe.post("/v1/completions", `{"prompt":"x","max_tokens":20,"seed":4}`).body, &resp)
	stop := " " + strings.Fields(resp.Choices[0].Text)[5]
	want, _, _ := strings.Cut(resp.Choices[0].Text, stop)

	env := newEnv(t, envOpts{stop: []string{stop}})
	decodeStrict(t, env.post("/v1/completions", `{"prompt":"x","max_tokens":20,"seed":4}`).body, &resp)
	if resp.Choices[0].Text != want || *resp.Choices[0].FinishReason != "stop" {
		t.Errorf("with the default stop %q: %q (%s), want %q", stop, resp.Choices[0].Text, *resp.Choices[0].FinishReason, want)
	}
}

func TestDefaultMaxTokens(t *testing.T) {
	tests := []struct {
		name             string
		defaultMaxTokens int
		promptLen        int
		want             int
		// numBlocks of 16 tokens (0: newEnv's 512)
		numBlocks int
	}{
		{"context room", 0, 100, 28, 0},
		{"flag below room", 10, 100, 10, 0},
		{"room below flag", 50, 120, 8, 0},
		// A KV cache of 64 tokens, under the context's 128: the default
		// is what the whole cache holds, not a refused request.
		{"cache room", 0, 40, 24, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t, envOpts{maxModelLen: 128, defaultMaxTokens: tt.defaultMaxTokens, numBlocks: tt.numBlocks})
			ids := make([]string, tt.promptLen)
			for i := range ids {
				ids[i] = "1"
			}
			r := env.post("/v1/completions", `{"prompt":[`+strings.Join(ids, ",")+`]}`)
			var resp openai.CompletionResponse
			decodeStrict(t, r.body, &resp)
			if r.status != 200 || resp.Usage.CompletionTokens != tt.want {
				t.Errorf("%d: completion tokens %d, want %d: %s", r.status, resp.Usage.CompletionTokens, tt.want, r.body)
			}
		})
	}
}

func TestModelsHealthReady(t *testing.T) {
	gpu := device.Device{Index: 0, Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 85520809984}
	env := newEnv(t, envOpts{devices: []device.Device{gpu}})
	r := env.do(http.MethodGet, "/v1/models", "")
	var list openai.ModelList
	decodeStrict(t, r.body, &list)
	if len(list.Data) != 1 || list.Data[0].ID != testModel || list.Data[0].MaxModelLen != testGeometry.ContextLen {
		t.Errorf("models: %s", r.body)
	}
	if r := env.do(http.MethodGet, "/v1/models/"+testModel, ""); r.status != http.StatusOK {
		t.Errorf("GET /v1/models/%s: %d", testModel, r.status)
	}
	if r := env.do(http.MethodGet, "/v1/models/other", ""); r.status != http.StatusNotFound {
		t.Errorf("GET /v1/models/other: %d", r.status)
	}
	if r := env.do(http.MethodGet, "/health", ""); r.status != http.StatusOK {
		t.Errorf("health: %d", r.status)
	}
	r = env.do(http.MethodGet, "/ready", "")
	var ready ReadyStatus
	decodeStrict(t, r.body, &ready)
	if r.status != http.StatusOK || !ready.Ready || !ready.Engine.Running || ready.Engine.KVBlocks != 512 ||
		!cmp.Equal(ready.Devices, []device.Device{gpu}) {
		t.Errorf("ready: %d %s", r.status, r.body)
	}
	env.srv.SetReady(false)
	if r := env.do(http.MethodGet, "/ready", ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("ready while not ready: %d", r.status)
	}
}

func TestMetrics(t *testing.T) {
	env := newEnv(t, envOpts{})
	env.post("/v1/completions", `{"prompt":"x","max_tokens":2}`)
	env.post("/v1/completions", `{"prompt":`)
	env.do(http.MethodGet, "/nope", "")
	want := []string{
		`kvpilot_http_requests_total{code="200",path="/v1/completions"} 1`,
		`kvpilot_http_requests_total{code="400",path="/v1/completions"} 1`,
		`kvpilot_http_requests_total{code="404",path="other"} 1`,
		`kvpilot_http_request_duration_seconds_bucket{path="/v1/completions"`,
		`vllm:num_requests_running{engine="0",model_name="test-model"} 0`,
		`vllm:request_success_total{engine="0",finished_reason="length",model_name="test-model"} 1`,
		`vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",model_name="test-model",num_gpu_blocks="512"} 1`,
	}
	// The engine publishes a finished request's metrics from its own loop,
	// which may run after the client has its answer: poll for a while.
	var missing []string
	poll.Wait(waitTimeout, func() bool {
		text := string(env.do(http.MethodGet, "/metrics", "").body)
		missing = missing[:0]
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = append(missing, w)
			}
		}
		return len(missing) == 0
	})
	for _, w := range missing {
		t.Errorf("/metrics lacks %s", w)
	}
}

func TestErrorStatuses(t *testing.T) {
	env := newEnv(t, envOpts{maxModelLen: 64, maxBodyBytes: 1024})
	big := `{"prompt":"` + strings.Repeat("x", 2000) + `"}`
	tests := []struct {
		name, method, path, body string
		status                   int
		param, code              string
	}{
		{"bad json", "POST", "/v1/completions", `{"prompt":`, 400, "", ""},
		{"not an object", "POST", "/v1/chat/completions", `"hi"`, 400, "", ""},
		{"wrong type", "POST", "/v1/completions", `{"prompt":"x","max_tokens":"ten"}`, 400, "max_tokens", ""},
		{"negative max_tokens", "POST", "/v1/completions", `{"prompt":"x","max_tokens":-5}`, 400, "max_tokens", ""},
		{"n<1", "POST", "/v1/completions", `{"prompt":"x","n":0}`, 400, "n", ""},
		{"logprobs on an executor that samples", "POST", "/v1/completions", `{"prompt":"x","logprobs":1}`, 400, "logprobs", ""},
		{"penalty on an executor that samples", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"presence_penalty":1}`, 400, "presence_penalty", ""},
		{"prompt too long", "POST", "/v1/completions", `{"prompt":"` + strings.Repeat("w ", 70) + `"}`, 400, "prompt", openai.CodeContextLength},
		{"prompt + max_tokens over context", "POST", "/v1/completions", `{"prompt":"a b c","max_tokens":62}`, 400, "max_tokens", openai.CodeContextLength},
		{"chat over context", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":100}`, 400, "max_completion_tokens", openai.CodeContextLength},
		{"token outside vocabulary", "POST", "/v1/completions", `{"prompt":[1,5000]}`, 400, "prompt", ""},
		{"negative token", "POST", "/v1/completions", `{"prompt":[-1]}`, 400, "prompt", ""},
		{"empty token prompt", "POST", "/v1/completions", `{"prompt":[]}`, 400, "prompt", ""},
		{"unknown model", "POST", "/v1/completions", `{"model":"gpt-4","prompt":"x"}`, 404, "model", openai.CodeModelNotFound},
		{"unknown path", "GET", "/v2/whatever", ``, 404, "", ""},
		{"wrong method", "GET", "/v1/completions", ``, 405, "", openai.CodeMethodNotAllowed},
		{"wrong method chat", "PUT", "/v1/chat/completions", `{}`, 405, "", openai.CodeMethodNotAllowed},
		{"body too large", "POST", "/v1/completions", big, 413, "", openai.CodeRequestTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := env.do(tt.method, tt.path, tt.body)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			checkErrorBody(t, r, tt.param, tt.code)
			if tt.status == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
		})
	}
}

func checkErrorBody(t *testing.T, r response, param, code string) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var e openai.ErrorResponse
	decodeStrict(t, r.body, &e)
	if e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("error body %s", r.body)
	}
	if got := deref(e.Error.Param); got != param {
		t.Errorf("param %q, want %q (%s)", got, param, r.body)
	}
	if got := deref(e.Error.Code); got != code {
		t.Errorf("code %q, want %q (%s)", got, code, r.body)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestBodyTooLargeChunked(t *testing.T) {
	env := newEnv(t, envOpts{maxBodyBytes: 1024})
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"prompt":"` + strings.Repeat("y", 4096) + `"}`))
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, env.ts.URL+"/v1/completions", pr) // no Content-Length
	resp, err := env.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", resp.StatusCode)
	}
}

func TestAPIKeys(t *testing.T) {
	env := newEnv(t, envOpts{keys: []string{"k1", "secret-2"}})
	body := `{"prompt":"x","max_tokens":1}`
	for _, auth := range []string{"", "Bearer", "Bearer wrong", "Basic secret-2", "secret-2"} {
		r := env.post("/v1/completions", body, "Authorization", auth)
		if r.status != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want 401", auth, r.status)
			continue
		}
		checkErrorBody(t, r, "", openai.CodeInvalidAPIKey)
	}
	if r := env.do(http.MethodGet, "/v1/models", ""); r.status != http.StatusUnauthorized {
		t.Errorf("/v1/models without a key: %d", r.status)
	}
	for _, key := range []string{"k1", "secret-2"} {
		if r := env.post("/v1/completions", body, "Authorization", "Bearer "+key); r.status != http.StatusOK {
			t.Errorf("key %q: status %d: %s", key, r.status, r.body)
		}
	}
	for _, path := range []string{"/health", "/ready", "/metrics"} {
		if r := env.do(http.MethodGet, path, ""); r.status != http.StatusOK {
			t.Errorf("%s without a key: %d", path, r.status)
		}
	}
}

func TestQueueFull(t *testing.T) {
	env := newEnv(t, envOpts{maxNumSeqs: 1, maxQueue: 1})
	env.gate.close()
	body := `{"prompt":"x","max_tokens":3}`
	results := make(chan response, 2)
	go func() { results <- env.post("/v1/completions", body) }()
	<-env.gate.entered // the first request is in the executor
	go func() { results <- env.post("/v1/completions", body) }()
	poll.Until(t, waitTimeout, "a waiting request", func() bool { _, w := env.eng.Pending(); return w == 1 })

	r := env.post("/v1/completions", body)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", r.status, r.body)
	}
	if r.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	checkErrorBody(t, r, "", openai.CodeQueueFull)

	env.gate.open()
	for range 2 {
		if r := <-results; r.status != http.StatusOK {
			t.Errorf("queued request: %d %s", r.status, r.body)
		}
	}
}

func TestDraining(t *testing.T) {
	env := newEnv(t, envOpts{})
	env.gate.close()
	inflight := make(chan response, 1)
	go func() { inflight <- env.post("/v1/completions", `{"prompt":"x","max_tokens":3}`) }()
	<-env.gate.entered
	stopped := make(chan error, 1)
	go func() { stopped <- env.eng.Stop(context.Background()) }()
	poll.Until(t, waitTimeout, "draining", func() bool { return !env.eng.Running() })

	r := env.post("/v1/completions", `{"prompt":"x","max_tokens":3}`)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("status %d while draining, want 503: %s", r.status, r.body)
	}
	checkErrorBody(t, r, "", openai.CodeDraining)
	if r := env.do(http.MethodGet, "/ready", ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("/ready while draining: %d", r.status)
	}
	env.gate.open()
	if r := <-inflight; r.status != http.StatusOK {
		t.Errorf("in-flight request while draining: %d %s", r.status, r.body)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Stop: %v", err)
	}
}

func TestDrainDeadlineEndsStreamWithError(t *testing.T) {
	env := newEnv(t, envOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.ts.URL+"/v1/completions",
		strings.NewReader(`{"prompt":"x","max_tokens":400,"stream":true}`))
	resp, err := env.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer stopCancel()
	env.gate.close() // hold the engine so the deadline passes mid-request
	go func() { <-env.gate.entered; _ = env.eng.Stop(stopCtx) }()
	events := readEvents(t, resp.Body)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("last event %q", events[len(events)-1])
	}
	var e openai.ErrorResponse
	decodeStrict(t, []byte(events[len(events)-2]), &e)
	if deref(e.Error.Code) != openai.CodeDraining {
		t.Errorf("error event %s", events[len(events)-2])
	}
}

func TestClientDisconnectFreesBlocks(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			env := newEnv(t, envOpts{})
			ctx, cancel := context.WithCancel(context.Background())
			body := fmt.Sprintf(`{"prompt":"%s","max_tokens":400,"stream":%t}`, strings.Repeat("w ", 60), stream)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.ts.URL+"/v1/completions", strings.NewReader(body))
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp, err := env.client.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				buf := make([]byte, 256)
				for {
					if _, err := resp.Body.Read(buf); err != nil {
						return
					}
				}
			}()
			poll.Until(t, waitTimeout, "the request to run", func() bool { r, _ := env.eng.Pending(); return r == 1 })
			// A few engine steps: blocks allocated, tokens streaming.
			steps := env.gate.steps.Load()
			poll.Until(t, waitTimeout, "a few engine steps", func() bool { return env.gate.steps.Load() >= steps+3 })
			// Hold the engine mid-request so the request cannot finish on
			// its own before the client goes away.
			env.gate.close()
			<-env.gate.entered
			cancel()
			<-done
			env.gate.open()
			env.checkNoLeak(t)
			r := env.do(http.MethodGet, "/metrics", "")
			if want := `vllm:request_success_total{engine="0",finished_reason="abort",model_name="test-model"} 1`; !strings.Contains(string(r.body), want) {
				t.Errorf("metrics lack %s", want)
			}
		})
	}
}

func TestMalformedInputNeverLeaks(t *testing.T) {
	env := newEnv(t, envOpts{maxModelLen: 128})
	bodies := []string{
		`{"prompt":[1,2,3],"max_tokens":1000000}`, `{"prompt":[999999]}`, `{"prompt":"x","min_tokens":5,"max_tokens":2}`,
		`{"prompt":"x","stop":[""]}`, `{"messages":[{"role":"user"}],"stream":true}`, `{"prompt":"\u0000\xff","max_tokens":3,"stream":true}`,
		`{"prompt":"x","temperature":1e400}`, `{"prompt":"x","top_k":99999999999999999999}`, `{"prompt":{"$ne":1}}`,
		`{"prompt":"x","max_tokens":5,"min_tokens":5,"ignore_eos":true,"priority":"low","seed":0}`,
	}
	for _, b := range bodies {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
			r := env.post(path, b)
			if r.status >= 500 {
				t.Errorf("%s %s: %d %s", path, b, r.status, r.body)
			}
		}
	}
	env.checkNoLeak(t)
}
