//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sample is one line of a Prometheus text exposition: name{labels} value.
type sample struct {
	name, labels string
	value        float64
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$`)

// scrape reads the samples a /metrics endpoint serves. An HTTPS endpoint
// is the in-cluster manager's: it is read with the metrics reader's token.
func scrape(url string) ([]sample, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	c := http.DefaultClient
	if strings.HasPrefix(url, "https://") {
		c = env.metricsClient
		req.Header.Set("Authorization", "Bearer "+env.metricsToken)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %d", url, resp.StatusCode)
	}
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if v, err := strconv.ParseFloat(m[3], 64); err == nil {
			out = append(out, sample{name: m[1], labels: m[2], value: v})
		}
	}
	return out, sc.Err()
}

// mustScrape is scrape, failing t on error.
func mustScrape(t *testing.T, url string) []sample {
	t.Helper()
	s, err := scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sumSamples adds up the samples called name whose labels contain every one
// of labels (each written as in the exposition: key="value").
func sumSamples(samples []sample, name string, labels ...string) float64 {
	var sum float64
	for _, s := range samples {
		if s.name == name && s.has(labels...) {
			sum += s.value
		}
	}
	return sum
}

// has reports whether the sample's labels contain every one of labels.
func (s sample) has(labels ...string) bool {
	for _, l := range labels {
		if !strings.Contains(s.labels, l) {
			return false
		}
	}
	return true
}

// poolLabels are the labels the manager's fleet metrics carry for a pool.
func poolLabels(ns, pool string) []string {
	return []string{fmt.Sprintf(`namespace="%s"`, ns), fmt.Sprintf(`pool="%s"`, pool)}
}

// scrapePausedGauge reads kvpilot_programs{state="paused"} of a pool; 0
// when the manager cannot be reached (it may be restarting).
func scrapePausedGauge(url, ns, pool string) float64 {
	s, err := scrape(url)
	if err != nil {
		return 0
	}
	return sumSamples(s, "kvpilot_programs", append(poolLabels(ns, pool), `state="paused"`)...)
}

// scrapeOffloadBytes reads a runtime pod's vllm:kv_offload_total_bytes_total
// by direction: to host (GPU_to_CPU) and back (CPU_to_GPU).
func scrapeOffloadBytes(t *testing.T, url string) (out, in float64) {
	t.Helper()
	s := mustScrape(t, url)
	return sumSamples(s, "vllm:kv_offload_total_bytes_total", `transfer_type="GPU_to_CPU"`),
		sumSamples(s, "vllm:kv_offload_total_bytes_total", `transfer_type="CPU_to_GPU"`)
}

// scrapeFleetCounters reads the fleet loop's counters of one pool from the
// manager's metrics, by name (summed over the pool's pods).
func scrapeFleetCounters(t *testing.T, url, ns, pool string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	labels := poolLabels(ns, pool)
	for _, s := range mustScrape(t, url) {
		if s.has(labels...) {
			out[s.name] += s.value
		}
	}
	return out
}
