//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kvpilot/kvpilot/internal/util/testing/nodeclients"
	"github.com/kvpilot/kvpilot/internal/util/testing/poll"
)

// TestSampleServesAndScales applies the CPU sample pool and its policy with
// kubectl, sends OpenAI requests to a pod's IP (Go's HTTP client and the
// npm openai package), scales the pool with kubectl scale and checks that
// its status and print columns follow.
func TestSampleServesAndScales(t *testing.T) {
	ns := newNamespace(t, "e2e-serve")
	samples := filepath.Join(env.repo, "config", "samples")
	mustKubectl(t, "apply", "-n", ns, "-f", filepath.Join(samples, "serving_v1alpha1_schedulerpolicy.yaml"))
	applyYAML(t, ns, fitSample(t, filepath.Join(samples, "serving_v1alpha1_inferencepool_cpu.yaml")))
	pods := readyPods(t, ns, "tiny-cpu", 2)
	addr := pods[0].Status.PodIP + ":8000"

	t.Run("go-http", func(t *testing.T) {
		body := `{"model":"tiny","messages":[{"role":"user","content":"Hello!"}],"max_tokens":12,"temperature":0}`
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Program-Id", "e2e-go")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			Object  string `json:"object"`
			Choices []struct {
				Message      struct{ Role, Content string } `json:"message"`
				FinishReason string                         `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || len(out.Choices) != 1 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		if out.Object != "chat.completion" || out.Choices[0].Message.Role != "assistant" || out.Usage.CompletionTokens < 1 {
			t.Errorf("unexpected completion: %s", b)
		}

		// Streamed: server-sent events ending with [DONE].
		body = `{"model":"tiny","prompt":"Once upon a time","max_tokens":8,"stream":true}`
		resp, err = http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var events []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events = append(events, data)
			}
		}
		if len(events) < 2 || events[len(events)-1] != "[DONE]" {
			t.Errorf("stream: %q", events)
		}
	})

	t.Run("npm-openai", func(t *testing.T) {
		dir := nodeclients.Dir(t) // hack/setup-node-clients.sh: the repo's one install of the npm clients
		script := `
const OpenAI = require('openai');
(async () => {
  const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: 'unused', maxRetries: 0 });
  const chat = await client.chat.completions.create({
    model: 'tiny', max_tokens: 10, messages: [{ role: 'user', content: 'Hello from the openai package' }],
  }, { headers: { 'X-Program-Id': 'e2e-node' } });
  let streamed = 0, finish = null;
  const stream = await client.completions.create({ model: 'tiny', prompt: 'Once', max_tokens: 6, stream: true });
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) { streamed++; finish = chunk.choices[0].finish_reason || finish; }
  }
  const models = await client.models.list();
  console.log(JSON.stringify({
    object: chat.object, role: chat.choices[0].message.role, tokens: chat.usage.completion_tokens,
    streamed, finish, models: models.data.map(m => m.id),
  }));
})().catch(e => { console.error(e); process.exit(1); });
`
		cmd := exec.Command("node", "-e", script)
		cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"), "BASE_URL=http://"+addr+"/v1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node: %v\n%s", err, out)
		}
		var res struct {
			Object, Role string
			Tokens       int
			Streamed     int
			Finish       string
			Models       []string
		}
		if err := json.Unmarshal(lastLine(out), &res); err != nil {
			t.Fatalf("node output: %v\n%s", err, out)
		}
		if res.Object != "chat.completion" || res.Role != "assistant" || res.Tokens < 1 || res.Streamed < 1 ||
			res.Finish == "" || len(res.Models) != 1 || res.Models[0] != "tiny" {
			t.Errorf("openai package saw: %+v", res)
		}
	})

	t.Run("scale", func(t *testing.T) {
		mustKubectl(t, "scale", "-n", ns, "kvpool/tiny-cpu", "--replicas=3")
		pods := readyPods(t, ns, "tiny-cpu", 3)
		poll.UntilOK(t, statusTimeout, func() string {
			pool := getPool(t, ns, "tiny-cpu")
			st := pool.Status
			if st.Replicas != 3 || st.ReadyReplicas != 3 || st.UpdatedReplicas != 3 {
				return fmt.Sprintf("status replicas %d ready %d updated %d", st.Replicas, st.ReadyReplicas, st.UpdatedReplicas)
			}
			c := st.Capacity
			if c == nil || len(c.Pods) != 3 {
				return fmt.Sprintf("status.capacity should list the 3 pods: %+v", c)
			}
			var sum int64
			for _, p := range c.Pods {
				sum += p.TotalKVTokens
			}
			if sum != c.TotalKVTokens || sum == 0 {
				return fmt.Sprintf("capacity total %d, pods sum %d", c.TotalKVTokens, sum)
			}
			names := map[string]bool{}
			for _, p := range pods {
				names[p.Name] = true
			}
			for _, p := range c.Pods {
				if !names[p.Name] {
					return fmt.Sprintf("status.capacity names pod %s, not one of the ready pods", p.Name)
				}
			}
			return ""
		})
		cols := printColumns(t, ns, "tiny-cpu")
		if cols["DESIRED"] != "3" || cols["READY"] != "3" || cols["POLICY"] != "agents" {
			t.Errorf("kubectl get kvpool columns: %v", cols)
		}
		if cols["PAUSED"] != "" && cols["PAUSED"] != "0" {
			t.Errorf("nothing should be paused: %v", cols)
		}
	})
}

// sampleCPU is what the CPU sample asks per pod, and nodeSampleCPU what the
// test asks on a real node instead: the kube-scheduler places pods by their
// requests, and three pods of one core each (the scale step) with the
// manager's two replicas do not fit a node of two cores, as the machines
// this runs on have.
const (
	sampleCPU     = `cpu: "1"`
	nodeSampleCPU = `cpu: 250m`
)

// fitSample reads a sample; on a real node it lowers the sample's CPU
// request to nodeSampleCPU.
func fitSample(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !env.cluster.RealNode {
		return string(b)
	}
	if !strings.Contains(string(b), sampleCPU) {
		t.Fatalf("%s no longer asks for %s: update the test's CPU request for the real node", path, sampleCPU)
	}
	t.Logf("real node of %d cores: the pool's pods ask for %s instead of the sample's %s", runtime.NumCPU(), nodeSampleCPU, sampleCPU)
	return strings.Replace(string(b), sampleCPU, nodeSampleCPU, 1)
}

// printColumns runs `kubectl get kvpool NAME` and maps each header to the
// row's value (headers may contain spaces, so columns are cut by the
// header's offsets).
func printColumns(t *testing.T, ns, pool string) map[string]string {
	t.Helper()
	out := mustKubectl(t, "get", "-n", ns, "kvpool", pool)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get kvpool: %q", out)
	}
	header, row := lines[0], lines[1]
	names := []string{"NAME", "DESIRED", "READY", "POLICY", "KV USED %", "PAUSED", "AGE"}
	cols := map[string]string{}
	for i, name := range names {
		start := strings.Index(header, name)
		if start < 0 {
			t.Fatalf("no column %q in %q", name, header)
		}
		end := len(row)
		if i+1 < len(names) {
			end = min(strings.Index(header, names[i+1]), len(row))
		}
		if start < len(row) {
			cols[name] = strings.TrimSpace(row[start:end])
		}
	}
	return cols
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}
