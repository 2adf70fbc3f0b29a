package simulator

import "testing"

func TestReplayBothStrategiesFinishEveryRequest(t *testing.T) {
	reqs := Poisson(150, 40, 3)
	cont, err := RunContinuous(reqs, DefaultSetup())
	if err != nil {
		t.Fatal(err)
	}
	st, err := RunStatic(reqs, DefaultSetup(), 32)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, r := range reqs {
		want += int64(min(r.OutputLen, r.MaxTokens))
	}
	for _, r := range []*Result{cont, st} {
		if r.Requests != len(reqs) || len(r.Latencies) != len(reqs) {
			t.Errorf("%s: %d of %d requests", r.Name, r.Requests, len(reqs))
		}
		if r.OutTokens != want {
			t.Errorf("%s: %d output tokens, want %d (lengths must follow the workload)", r.Name, r.OutTokens, want)
		}
	}
	if cont.Throughput() <= st.Throughput() {
		t.Errorf("continuous %.2f req/s should beat static %.2f req/s", cont.Throughput(), st.Throughput())
	}
}
