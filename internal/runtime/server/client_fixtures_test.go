package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvpilot/kvpilot/internal/runtime/anthropic"
	"github.com/kvpilot/kvpilot/internal/runtime/codec"
	"github.com/kvpilot/kvpilot/internal/runtime/executor/sim"
	"github.com/kvpilot/kvpilot/internal/runtime/model"
	"github.com/kvpilot/kvpilot/internal/runtime/openai"
)

// knownRefused lists the fixtures the server refuses today, with why. Each
// must still be refused with a 400: the test fails once one is accepted, so
// whoever teaches the server the field removes its entry here.
var knownRefused = map[string]string{}

// fixtureMaxTokens replaces every output cap a fixture sets, and is the
// server's default for those that set none, so the replies stay short.
const fixtureMaxTokens = 8

// clientFixture is one request an agent client sent with its defaults
// (testdata/clients/README.md says how they were captured and redacted).
type clientFixture struct {
	Client   string            `json:"client"`
	Version  string            `json:"version"`
	Captured string            `json:"captured"`
	Method   string            `json:"method"`
	Path     string            `json:"path"`
	Headers  map[string]string `json:"headers"`
	Body     json.RawMessage   `json:"body"`
}

// newClientFixtureEnv serves with the real Qwen2.5 chat template over the
// byte tokenizer, as the "qwen2.5 jinja" env of toolEnvs does, but on the
// sim executor with a 128k context: the clients' system prompts and tools
// are up to 61k byte tokens, which the cpu executor takes minutes to
// prefill on two cores (a 31k-token one took over 4 minutes), while
// parsing, rendering, tokenizing, scheduling and answering are the
// server's own code either way.
func newClientFixtureEnv(t *testing.T) *testEnv {
	t.Helper()
	qwen := qwenTemplate(t)
	const contextLen = 128 << 10
	acc, err := sim.LookupAccelerator("H100-SXM")
	if err != nil {
		t.Fatal(err)
	}
	geo := testGeometry
	geo.ContextLen = contextLen
	se, err := sim.New(sim.Options{Accelerator: acc, Geometry: geo, StepOverhead: 100 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, envOpts{
		exec: se, codec: codec.Model{Tokenizer: model.NewByteTokenizer(model.ByteVocabSize), Template: qwen},
		decoder: se.Vocabulary(), eos: []int32{se.EOS()}, vocabSize: se.Vocabulary().Size(),
		maxModelLen: contextLen, numBlocks: contextLen / 16, defaultMaxTokens: fixtureMaxTokens,
	})
}

// TestClientFixtures replays each request of testdata/clients (every
// client's file there, whoever added it) with the test server's model name
// and short output caps, and requires the API's whole answer: a 200 and,
// for streams, the terminal event. Each fixture is a subtest named after
// its file.
func TestClientFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/clients/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/clients")
	}
	env := newClientFixtureEnv(t)
	seen := map[string]bool{}
	for _, file := range files {
		name := filepath.Base(file)
		seen[name] = true
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			fx := loadClientFixture(t, file)
			body, stream := replayBody(t, fx.Body)
			var header []string
			for k, v := range fx.Headers {
				header = append(header, k, v)
			}
			r := env.do(fx.Method, fx.Path, body, header...)
			if reason, ok := knownRefused[name]; ok {
				if r.status == http.StatusOK {
					t.Fatalf("accepted now (known refused: %s): remove it from knownRefused", reason)
				}
				if r.status != http.StatusBadRequest {
					t.Fatalf("known refused (%s) with 400, got %d: %s", reason, r.status, r.body)
				}
				t.Logf("refused as known (%s): %s", reason, r.body)
				return
			}
			if r.status != http.StatusOK {
				t.Fatalf("%s %s %s: status %d: %s", fx.Client, fx.Version, fx.Path, r.status, r.body)
			}
			checkClientAnswer(t, fx.Path, stream, r.body)
		})
	}
	for name := range knownRefused {
		if !seen[name] {
			t.Errorf("knownRefused names %s, which is not in testdata/clients", name)
		}
	}
}

func loadClientFixture(t *testing.T, file string) clientFixture {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var fx clientFixture
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fx); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if fx.Client == "" || fx.Version == "" || fx.Method == "" || !strings.HasPrefix(fx.Path, "/v1/") {
		t.Fatalf("%s: client, version, method and path are required", file)
	}
	for k := range fx.Headers {
		if k := strings.ToLower(k); k == "authorization" || k == "x-api-key" {
			t.Fatalf("%s: carries the credential header %s", file, k)
		}
	}
	return fx
}

// replayBody is the fixture's body with the test server's model and every
// output cap it sets lowered to fixtureMaxTokens; the other fields pass
// through as captured.
func replayBody(t *testing.T, raw json.RawMessage) (body string, stream bool) {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return "", false // a GET
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("body: %v", err)
	}
	fields["model"], _ = json.Marshal(testModel)
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if _, ok := fields[k]; ok {
			fields[k], _ = json.Marshal(fixtureMaxTokens)
		}
	}
	if s, ok := fields["stream"]; ok {
		if err := json.Unmarshal(s, &stream); err != nil {
			t.Fatalf("stream: %v", err)
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), stream
}

// checkClientAnswer checks a 200's body has its API's shape: the whole
// object, or a stream up to its terminal event.
func checkClientAnswer(t *testing.T, path string, stream bool, body []byte) {
	t.Helper()
	// Claude Code posts to /v1/messages?beta=true.
	path, _, _ = strings.Cut(path, "?")
	switch {
	case path == routeChat && stream:
		events := readEvents(t, bytes.NewReader(body))
		finished := false
		for i, ev := range events {
			if ev == "[DONE]" {
				if i != len(events)-1 {
					t.Fatalf("events after [DONE]: %q", events[i+1:])
				}
				continue
			}
			var c openai.ChatChunk
			decodeStrict(t, []byte(ev), &c)
			for _, ch := range c.Choices {
				finished = finished || ch.FinishReason != nil
			}
		}
		if !finished || len(events) == 0 || events[len(events)-1] != "[DONE]" {
			t.Fatalf("stream without a finish_reason chunk then [DONE]: %s", body)
		}
	case path == routeChat:
		var resp openai.ChatResponse
		decodeStrict(t, body, &resp)
		if resp.Object != "chat.completion" || len(resp.Choices) == 0 || resp.Choices[0].FinishReason == nil {
			t.Fatalf("chat completion: %s", body)
		}
	case path == routeResponses && stream:
		names := namedEventsOf(t, body)
		// A reply cut at max_output_tokens ends with response.incomplete.
		if last := names[len(names)-1]; names[0] != "response.created" || (last != "response.completed" && last != "response.incomplete") {
			t.Fatalf("Responses stream events %q", names)
		}
	case path == routeResponses:
		var resp openai.Response
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if resp.Object != "response" || (resp.Status != "completed" && resp.Status != "incomplete") {
			t.Fatalf("response: %s", body)
		}
	case path == routeMessages && stream:
		names := namedEventsOf(t, body)
		if names[0] != "message_start" || names[len(names)-1] != "message_stop" {
			t.Fatalf("Messages stream events %q", names)
		}
	case path == routeMessages:
		var resp anthropic.Response
		decodeStrict(t, body, &resp)
		if resp.Type != "message" || resp.StopReason == nil {
			t.Fatalf("message: %s", body)
		}
	case path == routeCountTokens:
		var count struct {
			InputTokens int `json:"input_tokens"`
		}
		decodeStrict(t, body, &count)
		if count.InputTokens <= 0 {
			t.Fatalf("count_tokens: %s", body)
		}
	case strings.HasPrefix(path, routeModels):
		var models map[string]any
		if err := json.Unmarshal(body, &models); err != nil || (models["object"] != "list" && models["object"] != "model") {
			t.Fatalf("models: %s (%v)", body, err)
		}
	default:
		t.Fatalf("no check for %s: add one", path)
	}
}

// namedEventsOf reads a whole named-event stream (Responses, Messages):
// its event names in order, each matching its data's type.
func namedEventsOf(t *testing.T, body []byte) []string {
	t.Helper()
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var name, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			var ev struct{ Type string }
			if err := json.Unmarshal([]byte(data), &ev); err != nil || name == "" || ev.Type != name {
				t.Fatalf("event %q with data %q (%v)", name, data, err)
			}
			names = append(names, name)
			name, data = "", ""
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if len(names) == 0 {
		t.Fatalf("empty stream: %s", body)
	}
	return names
}
