package sampling

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	inf = float32(math.Inf(1))
	nan = float32(math.NaN())
)

func TestGreedyAndEdgeCases(t *testing.T) {
	tests := []struct {
		name   string
		logits []float32
		p      Params
		banned []int32
		want   int32
	}{
		{"argmax", []float32{0.1, 3, 2}, Params{}, nil, 1},
		{"ties go to the lowest id", []float32{1, 5, 5, 2}, Params{}, nil, 1},
		{"top-k 1 at temperature 1", []float32{1, 5, 5, 2}, Params{Temperature: 1, TopK: 1}, nil, 1},
		{"negative temperature", []float32{1, 5, 2}, Params{Temperature: -1}, nil, 1},
		{"NaN temperature", []float32{1, 5, 2}, Params{Temperature: nan}, nil, 1},
		{"NaN logits are skipped", []float32{nan, 1, 0}, Params{}, nil, 1},
		{"banned argmax", []float32{1, 5, 3}, Params{}, []int32{1}, 2},
		{"out-of-range banned ids are ignored", []float32{1, 5}, Params{}, []int32{-1, 7}, 1},
		{"all -Inf", []float32{-inf, -inf}, Params{}, nil, 0},
		{"all banned or -Inf: lowest allowed id", []float32{-inf, 1, -inf}, Params{}, []int32{1}, 0},
		{"everything banned", []float32{1, 2}, Params{Temperature: 1}, []int32{0, 1}, 0},
		{"+Inf wins a draw", []float32{1, inf, 2}, Params{Temperature: 1}, nil, 1},
		{"+Inf wins top-k", []float32{1, inf, 2}, Params{Temperature: 1, TopK: 2}, nil, 1},
		{"+Inf wins top-p", []float32{1, inf, 2}, Params{Temperature: 1, TopP: 0.5}, nil, 1},
		{"one finite token, full draw", []float32{-inf, 3, -inf, nan}, Params{Temperature: 1}, nil, 1},
		{"one finite token, top-k", []float32{-inf, 3, -inf, nan}, Params{Temperature: 1, TopK: 3}, nil, 1},
		{"one finite token, top-p", []float32{-inf, 3, -inf, nan}, Params{Temperature: 1, TopP: 0.3}, nil, 1},
		{"nothing finite, top-k", []float32{-inf, nan, -inf}, Params{Temperature: 1, TopK: 2}, []int32{0}, 1},
		{"tiny temperature is nearly greedy", []float32{1, 1.001, 0}, Params{Temperature: 1e-30}, nil, 1},
	}
	var s Sampler
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := NewRNG(1)
			for range 20 {
				if got := s.Sample(tt.logits, &tt.p, &rng, tt.banned); got != tt.want {
					t.Fatalf("Sample() = %d, want %d", got, tt.want)
				}
			}
		})
	}
}

// peaked returns logits shaped like a language model's: a broad normal
// background and a few strong candidates.
func peaked(vocab int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	l := make([]float32, vocab)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2)
	}
	for range 20 {
		l[r.IntN(vocab)] = 8 + float32(r.Float64()*6)
	}
	return l
}

func allModes() []Params {
	return []Params{
		{},
		{Temperature: 1},
		{Temperature: 0.7, TopK: 50},
		{Temperature: 1, TopP: 0.9},
		{Temperature: 0.8, TopK: 40, TopP: 0.95},
	}
}

func TestBannedNeverSampledAndLogitsRestored(t *testing.T) {
	logits := make([]float32, 10) // uniform
	logits[3], logits[7] = 2, 2   // and the banned ones most likely
	orig := slices.Clone(logits)
	banned := []int32{3, 7, 3} // a duplicate must not break the restore
	var s Sampler
	for _, p := range allModes() {
		rng := NewRNG(5)
		for range 5000 {
			if id := s.Sample(logits, &p, &rng, banned); id == 3 || id == 7 {
				t.Fatalf("%+v: sampled banned id %d", p, id)
			}
		}
		if diff := cmp.Diff(orig, logits); diff != "" {
			t.Fatalf("%+v: logits changed (-before +after):\n%s", p, diff)
		}
	}
}

func TestTopKRestricts(t *testing.T) {
	logits := peaked(1000, 3)
	want := naiveOrder(logits)[:5]
	slices.Sort(want)
	var s Sampler
	rng := NewRNG(9)
	p := Params{Temperature: 5, TopK: 5} // hot, so that all five show up
	seen := map[int32]int{}
	for range 5000 {
		seen[s.Sample(logits, &p, &rng, nil)]++
	}
	var got []int32
	for id := range seen {
		got = append(got, id)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sampled ids (-top 5 +got):\n%s", diff)
	}
}

func TestTopPRestricts(t *testing.T) {
	skipShort(t)
	probs := []float64{0.06, 0.5, 0.15, 0.25, 0.04}
	logits := make([]float32, len(probs))
	for i, p := range probs {
		logits[i] = float32(math.Log(p))
	}
	var s Sampler
	for _, tc := range []struct {
		p    Params
		want []int32
	}{
		{Params{Temperature: 1, TopP: 0.4}, []int32{1}},
		{Params{Temperature: 1, TopP: 0.7}, []int32{1, 3}},
		{Params{Temperature: 1, TopP: 0.85}, []int32{1, 2, 3}},
		{Params{Temperature: 1, TopP: 0.85, TopK: 4}, []int32{1, 2, 3}},
		{Params{Temperature: 1, TopP: 0.95}, []int32{0, 1, 2, 3}},
	} {
		if diff := cmp.Diff(tc.want, drawnIDs(&s, logits, &tc.p, 11, 5000)); diff != "" {
			t.Errorf("%+v: sampled ids (-nucleus +got):\n%s", tc.p, diff)
		}
	}

	// A large vocabulary takes the quickselect path.
	logits = peaked(32000, 4)
	for _, p := range []Params{{Temperature: 1, TopP: 0.9}, {Temperature: 2.5, TopP: 0.5}} {
		nuc := naiveNucleus(logits, &p)
		rng := NewRNG(12)
		for range 2000 {
			if id := s.Sample(logits, &p, &rng, nil); !slices.Contains(nuc, id) {
				t.Fatalf("%+v: sampled %d outside the nucleus of %d tokens", p, id, len(nuc))
			}
		}
	}
}

func TestSameSeedSameSequence(t *testing.T) {
	skipShort(t)
	logits := peaked(32000, 5)
	for _, p := range allModes() {
		sequence := func(seed uint64) []int32 {
			var s Sampler
			rng := NewRNG(seed)
			var ids []int32
			for range 200 {
				ids = append(ids, s.Sample(logits, &p, &rng, nil))
			}
			return ids
		}
		a, b := sequence(42), sequence(42)
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%+v: seed 42 twice (-first +second):\n%s", p, diff)
		}
		if !p.greedy() && slices.Equal(a, sequence(43)) {
			t.Errorf("%+v: seeds 42 and 43 gave the same 200 tokens", p)
		}
	}
}

// TestDistribution checks with a chi-square statistic that the frequencies
// of many draws match the probabilities softmax, top-k and top-p call for.
// The seed is fixed, so the test is deterministic; the bound is the 0.9999
// quantile for the degrees of freedom involved, so a correct sampler passes
// with any seed but a biased one (an off-by-one, a missing renormalisation)
// does not.
func TestDistribution(t *testing.T) {
	skipShort(t)
	logits := []float32{1.0, 0.5, 0, -0.5, 2, -1, 1.2}
	const draws = 200000
	var s Sampler
	for _, p := range []Params{
		{Temperature: 1},
		{Temperature: 0.6},
		{Temperature: 1.5, TopK: 4},
		{Temperature: 1, TopP: 0.8},
		{Temperature: 1.3, TopK: 5, TopP: 0.9},
	} {
		want := naiveProbs(logits, &p)
		rng := NewRNG(2024)
		counts := make([]int, len(logits))
		for range draws {
			counts[s.Sample(logits, &p, &rng, nil)]++
		}
		chi2, df := 0.0, -1
		for i, q := range want {
			if q == 0 {
				if counts[i] != 0 {
					t.Errorf("%+v: id %d has probability 0 but was drawn %d times", p, i, counts[i])
				}
				continue
			}
			e := q * draws
			chi2 += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
			df++
		}
		// 0.9999 quantiles of chi-square with 1..6 degrees of freedom.
		limit := []float64{0, 15.1, 18.4, 21.1, 23.5, 25.7, 27.9}[df]
		if chi2 > limit {
			t.Errorf("%+v: chi-square %.1f over %d degrees of freedom, above %.1f; counts %v, probabilities %v",
				p, chi2, df, limit, counts, want)
		}
	}
}

func TestTopKMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	var s Sampler
	for range 500 {
		logits := make([]float32, 2+r.IntN(300))
		for i := range logits {
			switch r.IntN(20) {
			case 0:
				logits[i] = nan
			case 1:
				logits[i] = -inf
			default:
				logits[i] = float32(r.IntN(8)) // many ties
			}
		}
		k := 1 + r.IntN(len(logits)-1)
		var got []int32
		for _, c := range s.topK(logits, k) {
			got = append(got, c.id)
		}
		if diff := cmp.Diff(naiveOrder(logits)[:k], got); diff != "" {
			t.Fatalf("topK(%v, %d) (-sorted +got):\n%s", logits, k, diff)
		}
	}
}

func TestNucleusMatchesSort(t *testing.T) {
	skipShort(t)
	r := rand.New(rand.NewPCG(8, 8))
	for range 500 {
		c := make([]cand, 1+r.IntN(3000))
		total := 0.0
		for i := range c {
			// Small integer weights: ties, and sums that are exact in any
			// order, so the naive and the quickselect boundaries agree.
			c[i] = cand{id: int32(i), w: float32(1 + r.IntN(20))}
			total += float64(c[i].w)
		}
		r.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
		target := r.Float64() * total

		sorted := slices.Clone(c)
		slices.SortFunc(sorted, byWeightDesc)
		var want []int32
		acc := 0.0
		for _, x := range sorted {
			want = append(want, x.id)
			acc += float64(x.w)
			if acc >= target {
				break
			}
		}

		n, mass := nucleus(c, target)
		var got []int32
		for _, x := range c[:n] {
			got = append(got, x.id)
		}
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("nucleus of %d candidates (-sorted prefix +got):\n%s", len(c), diff)
		}
		if mass != acc {
			t.Fatalf("nucleus mass = %v, want %v", mass, acc)
		}
	}
}

func TestNucleusOfMatchesSort(t *testing.T) {
	skipShort(t)
	r := rand.New(rand.NewPCG(10, 10))
	var s Sampler
	for range 300 {
		w := make([]float32, 1+r.IntN(5000))
		total := 0.0
		spread := 1 + r.IntN(1024) // from near-flat to spanning ten octaves
		for i := range w {
			// Multiples of 1/1024 up to 1: ties, many buckets, and sums
			// that are exact in any order.
			if r.IntN(10) > 0 {
				w[i] = float32(1024-r.IntN(spread)) / 1024
			}
			total += float64(w[i])
		}
		target := r.Float64() * total

		order := make([]cand, 0, len(w))
		for i, e := range w {
			order = append(order, cand{id: int32(i), w: e})
		}
		slices.SortFunc(order, byWeightDesc)
		var want []int32
		acc := 0.0
		for _, x := range order {
			want = append(want, x.id)
			acc += float64(x.w)
			if acc >= target {
				break
			}
		}

		c, mass := s.nucleusOf(w, target)
		var got []int32
		for _, x := range c {
			got = append(got, x.id)
		}
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("nucleusOf %d weights, target %v (-sorted prefix +got):\n%s", len(w), target, diff)
		}
		if mass != acc {
			t.Fatalf("nucleusOf mass = %v, want %v", mass, acc)
		}
	}
}

func TestSampleDoesNotAllocate(t *testing.T) {
	logits := peaked(32000, 7)
	banned := []int32{2, 5}
	var s Sampler
	for _, p := range allModes() {
		rng := NewRNG(1)
		s.Sample(logits, &p, &rng, banned) // grow the scratch space
		if a := testing.AllocsPerRun(20, func() { s.Sample(logits, &p, &rng, banned) }); a != 0 {
			t.Errorf("%+v: Sample allocates %v times per call, want 0", p, a)
		}
	}
}

// naiveOrder returns all ids sorted most likely first, ties by id, NaN as
// -Inf.
func naiveOrder(logits []float32) []int32 {
	ids := make([]int32, len(logits))
	for i := range ids {
		ids[i] = int32(i)
	}
	key := func(id int32) float32 {
		if v := logits[id]; v == v {
			return v
		}
		return -inf
	}
	sort.SliceStable(ids, func(a, b int) bool { return key(ids[a]) > key(ids[b]) })
	return ids
}

// naiveProbs is the distribution Sample should draw from, computed the
// obvious way: full sort, softmax in float64, truncate, renormalise.
func naiveProbs(logits []float32, p *Params) []float64 {
	order := naiveOrder(logits)
	if p.TopK > 0 && p.TopK < len(order) {
		order = order[:p.TopK]
	}
	top := float64(logits[order[0]])
	probs := make([]float64, len(order))
	sum := 0.0
	for i, id := range order {
		probs[i] = math.Exp((float64(logits[id]) - top) / float64(p.Temperature))
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	if p.TopP > 0 && p.TopP < 1 {
		acc := 0.0
		for i := range probs {
			acc += probs[i]
			if acc >= float64(p.TopP) {
				order, probs = order[:i+1], probs[:i+1]
				break
			}
		}
	}
	out := make([]float64, len(logits))
	sum = 0
	for _, q := range probs {
		sum += q
	}
	for i, id := range order {
		out[id] = probs[i] / sum
	}
	return out
}

// naiveNucleus returns the ids naiveProbs keeps.
func naiveNucleus(logits []float32, p *Params) []int32 {
	var ids []int32
	for id, q := range naiveProbs(logits, p) {
		if q > 0 {
			ids = append(ids, int32(id))
		}
	}
	return ids
}

// skipShort skips a long single-goroutine statistical test under -short:
// make test runs it in full, and again with -race -short, where it would
// take minutes and has no concurrency for the race detector to check.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("long statistical test; runs without -short")
	}
}

// drawnIDs is every id that n draws from logits with p give, sorted; the
// draws use a generator seeded with seed.
func drawnIDs(s *Sampler, logits []float32, p *Params, seed uint64, n int) []int32 {
	rng := NewRNG(seed)
	seen := map[int32]bool{}
	for range n {
		seen[s.Sample(logits, p, &rng, nil)] = true
	}
	got := slices.Collect(maps.Keys(seen))
	slices.Sort(got)
	return got
}

// TestArgmaxMatchesOnePass: argmax picks what the single pass picks (the
// first of the largest, NaN ignored, -1 when nothing is above -Inf) on rows
// of every length mod 8, with ties, NaN and both infinities.
func TestArgmaxMatchesOnePass(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50_000 {
		l := make([]float32, r.IntN(40))
		for i := range l {
			switch r.IntN(7) {
			case 0:
				l[i] = float32(math.NaN())
			case 1:
				l[i] = negInf
			case 2:
				l[i] = float32(math.Inf(1))
			case 3:
				l[i] = float32(math.Copysign(0, -1))
			default:
				l[i] = float32(r.IntN(4))
			}
		}
		wantID, wantTop := argmaxOnePass(l)
		id, top := argmax(l)
		if id != wantID || (id >= 0 && math.Float32bits(top) != math.Float32bits(l[id])) || (id >= 0 && top != wantTop) {
			t.Fatalf("argmax(%v) = %d, %v; the single pass gives %d, %v", l, id, top, wantID, wantTop)
		}
	}
}
