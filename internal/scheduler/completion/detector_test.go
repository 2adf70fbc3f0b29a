package completion

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tok is one generated token as the engine hands it to Add.
type tok struct {
	id     int32
	text   string
	cancel bool
}

const (
	idText int32 = 100
	idEOS  int32 = 2
	idStop int32 = 3
)

func text(s string) tok { return tok{id: idText, text: s} }

// result is what a client and the engine see of one request.
type result struct {
	Deltas  []string // one per Add call, "" when nothing was released
	Reason  Reason
	Matched string
	Tokens  int
}

func (r result) text() string { return strings.Join(r.Deltas, "") }

// run feeds toks to a Detector until it finishes or they run out.
func run(t *testing.T, p Params, toks ...tok) result {
	t.Helper()
	var d Detector
	d.Reset(&p)
	return feed(&d, toks...)
}

func feed(d *Detector, toks ...tok) result {
	var res result
	for _, tk := range toks {
		delta, r := d.Add(tk.id, []byte(tk.text), tk.cancel)
		res.Deltas = append(res.Deltas, string(delta))
		if r != None {
			res.Reason = r
			break
		}
	}
	res.Matched = d.StopMatched()
	res.Tokens = d.OutputTokens()
	return res
}

func TestReasonString(t *testing.T) {
	got := []string{None.String(), Stop.String(), Length.String(), Cancelled.String(), Error.String(), Reason(9).String()}
	want := []string{"", "stop", "length", "cancelled", "error", "Reason(9)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Reason.String() (-want +got):\n%s", diff)
	}
}

// TestCheckOrder makes every pair of finish conditions hold on the same
// (third) token and checks which one gives the reason, and what text goes
// out.
func TestCheckOrder(t *testing.T) {
	base := func() Params {
		return Params{
			MaxTokens:    100,
			EOSTokenIDs:  []int32{idEOS},
			StopTokenIDs: []int32{idStop},
			StopStrings:  []string{"##"},
			PromptTokens: 10,
		}
	}
	maxTokens := func(p *Params) { p.MaxTokens = 3 }
	chars := func(p *Params) { p.MaxResponseChars = 5 }
	context := func(p *Params) { p.MaxTotalTokens = 13 }
	both := func(a, b func(*Params)) func(*Params) {
		return func(p *Params) { a(p); b(p) }
	}
	eosTok := tok{id: idEOS, text: "</s>"}
	stopTok := tok{id: idStop, text: "<|end|>"}

	tests := []struct {
		name string
		mod  func(*Params)
		last tok
		want result
	}{
		{
			name: "none",
			last: text("efg"),
			want: result{Deltas: []string{"ab", "cd", "efg"}, Tokens: 3},
		},
		{
			name: "cancelled+max tokens",
			mod:  maxTokens,
			last: tok{id: idText, text: "efg", cancel: true},
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Cancelled, Tokens: 2},
		},
		{
			name: "cancelled+eos",
			last: tok{id: idEOS, cancel: true},
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Cancelled, Tokens: 2},
		},
		{
			name: "cancelled+stop token",
			last: tok{id: idStop, cancel: true},
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Cancelled, Tokens: 2},
		},
		{
			name: "cancelled+stop string",
			last: tok{id: idText, text: "e##", cancel: true},
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Cancelled, Tokens: 2},
		},
		{
			name: "cancelled+max chars",
			mod:  chars,
			last: tok{id: idText, text: "efg", cancel: true},
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Cancelled, Tokens: 2},
		},
		{
			name: "cancelled+context",
			mod:  context,
			last: tok{id: idText, text: "efg", cancel: true},
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Cancelled, Tokens: 2},
		},
		{
			name: "max tokens+eos: length, EOS text still dropped",
			mod:  maxTokens,
			last: eosTok,
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Length, Tokens: 3},
		},
		{
			name: "max tokens+stop token",
			mod:  maxTokens,
			last: stopTok,
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Length, Tokens: 3},
		},
		{
			name: "max tokens+stop string: stop (vLLM's detokenizer overrides the length), text cut",
			mod:  maxTokens,
			last: text("e##f"),
			want: result{Deltas: []string{"ab", "cd", "e"}, Reason: Stop, Matched: "##", Tokens: 3},
		},
		{
			name: "max tokens+max chars",
			mod:  both(maxTokens, chars),
			last: text("efg"),
			want: result{Deltas: []string{"ab", "cd", "e"}, Reason: Length, Tokens: 3},
		},
		{
			name: "max tokens+context",
			mod:  both(maxTokens, context),
			last: text("efg"),
			want: result{Deltas: []string{"ab", "cd", "efg"}, Reason: Length, Tokens: 3},
		},
		{
			name: "eos+stop token: one id in both lists",
			mod:  func(p *Params) { p.StopTokenIDs = []int32{idEOS} },
			last: eosTok,
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Stop, Tokens: 3},
		},
		{
			name: "eos+stop string: EOS bytes are not text",
			last: tok{id: idEOS, text: "e##"},
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Stop, Tokens: 3},
		},
		{
			name: "eos+max chars",
			mod:  chars,
			last: tok{id: idEOS, text: "efg"},
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Stop, Tokens: 3},
		},
		{
			name: "eos+context",
			mod:  context,
			last: eosTok,
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Stop, Tokens: 3},
		},
		{
			name: "stop token+stop string",
			last: tok{id: idStop, text: "e##"},
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Stop, Tokens: 3},
		},
		{
			name: "stop token+max chars",
			mod:  chars,
			last: tok{id: idStop, text: "efg"},
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Stop, Tokens: 3},
		},
		{
			name: "stop token+context",
			mod:  context,
			last: stopTok,
			want: result{Deltas: []string{"ab", "cd", ""}, Reason: Stop, Tokens: 3},
		},
		{
			name: "stop string+max chars: stop, text still within the limit",
			mod:  chars,
			last: text("ef##"),
			want: result{Deltas: []string{"ab", "cd", "e"}, Reason: Stop, Matched: "##", Tokens: 3},
		},
		{
			name: "stop string+context",
			mod:  context,
			last: text("e##"),
			want: result{Deltas: []string{"ab", "cd", "e"}, Reason: Stop, Matched: "##", Tokens: 3},
		},
		{
			name: "max chars+context: length, cut at the limit",
			mod:  both(chars, context),
			last: text("efg"),
			want: result{Deltas: []string{"ab", "cd", "e"}, Reason: Length, Tokens: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			if tt.mod != nil {
				tt.mod(&p)
			}
			got := run(t, p, text("ab"), text("cd"), tt.last)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStopTokenReported(t *testing.T) {
	var d Detector
	d.Reset(&Params{MaxTokens: 10, EOSTokenIDs: []int32{idEOS}, StopTokenIDs: []int32{7, idStop}})
	d.Add(idText, []byte("x"), false)
	if _, r := d.Add(idStop, []byte("<|end|>"), false); r != Stop {
		t.Fatalf("Add(stop token) reason = %v, want stop", r)
	}
	if id, ok := d.StopToken(); !ok || id != idStop {
		t.Errorf("StopToken() = %d, %v; want %d, true", id, ok, idStop)
	}
	if d.StopMatched() != "" {
		t.Errorf("StopMatched() = %q, want empty", d.StopMatched())
	}
}

func TestIgnoreEOS(t *testing.T) {
	got := run(t, Params{MaxTokens: 3, IgnoreEOS: true, EOSTokenIDs: []int32{idEOS}},
		text("a"), tok{id: idEOS, text: "</s>"}, text("b"))
	want := result{Deltas: []string{"a", "</s>", "b"}, Reason: Length, Tokens: 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestMinTokens(t *testing.T) {
	p := Params{
		MaxTokens:    10,
		MinTokens:    2,
		EOSTokenIDs:  []int32{idEOS},
		StopTokenIDs: []int32{idStop},
		StopStrings:  []string{"##"},
	}
	tests := []struct {
		name string
		toks []tok
		want result
	}{
		{
			name: "eos among the first min tokens is an ordinary token",
			toks: []tok{text("a"), tok{id: idEOS, text: "</s>"}, text("b")},
			want: result{Deltas: []string{"a", "</s>", "b"}, Tokens: 3},
		},
		{
			name: "eos after min tokens stops",
			toks: []tok{text("a"), text("b"), tok{id: idEOS}},
			want: result{Deltas: []string{"a", "b", ""}, Reason: Stop, Tokens: 3},
		},
		{
			name: "stop token among the first min tokens",
			toks: []tok{tok{id: idStop, text: "|"}, text("b"), tok{id: idStop, text: "|"}},
			want: result{Deltas: []string{"|", "b", ""}, Reason: Stop, Tokens: 3},
		},
		{
			name: "stop string completed among the first min tokens is text",
			toks: []tok{text("a##"), text("b")},
			// The last "#" could begin another "##", so it waits.
			want: result{Deltas: []string{"a#", "#b"}, Tokens: 2},
		},
		{
			name: "stop string that starts early and completes after min tokens",
			toks: []tok{text("x"), text("a#"), text("#b")},
			want: result{Deltas: []string{"x", "a", ""}, Reason: Stop, Matched: "##", Tokens: 3},
		},
		{
			name: "max tokens is not held off by min tokens",
			toks: []tok{text("a"), text("b")},
			want: result{Deltas: []string{"a", "b"}, Reason: Length, Tokens: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := p
			if strings.HasPrefix(tt.name, "max tokens") {
				p.MaxTokens = 2
				p.MinTokens = 5
			}
			if diff := cmp.Diff(tt.want, run(t, p, tt.toks...)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestBanned(t *testing.T) {
	var d Detector
	d.Reset(&Params{MaxTokens: 10, MinTokens: 2, EOSTokenIDs: []int32{idEOS}, StopTokenIDs: []int32{idStop}})
	var got [][]int32
	for range 3 {
		got = append(got, d.Banned())
		d.Add(idText, []byte("a"), false)
	}
	want := [][]int32{{idEOS, idStop}, {idEOS, idStop}, nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Banned() per step (-want +got):\n%s", diff)
	}

	d.Reset(&Params{MaxTokens: 10, MinTokens: 2, IgnoreEOS: true, EOSTokenIDs: []int32{idEOS}})
	if b := d.Banned(); b != nil {
		t.Errorf("Banned() with IgnoreEOS and no stop ids = %v, want nil", b)
	}
}

func TestStopStringAcrossTokens(t *testing.T) {
	p := Params{MaxTokens: 100, StopStrings: []string{"STOP"}}
	tests := []struct {
		name string
		toks []string
		want []string
	}{
		{"one token", []string{"abc", "STOP"}, []string{"abc", ""}},
		{"two tokens", []string{"abc", "ST", "OP"}, []string{"abc", "", ""}},
		{"three tokens", []string{"abc", "S", "TO", "P"}, []string{"abc", "", "", ""}},
		{"four tokens", []string{"abc", "S", "T", "O", "P"}, []string{"abc", "", "", "", ""}},
		{"inside one token", []string{"abSTOPcd"}, []string{"ab"}},
		{"split, with text around", []string{"xyS", "TO", "Pzz"}, []string{"xy", "", ""}},
		{"split, text around both sides", []string{"aS", "TOP b"}, []string{"a", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var toks []tok
			for _, s := range tt.toks {
				toks = append(toks, text(s))
			}
			got := run(t, p, toks...)
			want := result{Deltas: tt.want, Reason: Stop, Matched: "STOP", Tokens: len(tt.toks)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestOverlappingStopStrings(t *testing.T) {
	tests := []struct {
		name  string
		stops []string
		toks  []string
		want  result
	}{
		{
			name:  "earliest start wins in one token",
			stops: []string{"b", "ab"},
			toks:  []string{"xab"},
			want:  result{Deltas: []string{"x"}, Reason: Stop, Matched: "ab", Tokens: 1},
		},
		{
			name:  "both complete in the same token: earliest start",
			stops: []string{"b", "ab"},
			toks:  []string{"xa", "b"},
			want:  result{Deltas: []string{"x", ""}, Reason: Stop, Matched: "ab", Tokens: 2},
		},
		{
			name:  "the short one completes first",
			stops: []string{"ab", "b"},
			toks:  []string{"xb", "ab"},
			want:  result{Deltas: []string{"x"}, Reason: Stop, Matched: "b", Tokens: 1},
		},
		{
			name:  "same start: the longest",
			stops: []string{"ab", "abc"},
			toks:  []string{"x", "abc"},
			want:  result{Deltas: []string{"x", ""}, Reason: Stop, Matched: "abc", Tokens: 2},
		},
		{
			name:  "same start, the shorter completes in an earlier token",
			stops: []string{"abc", "ab"},
			toks:  []string{"xab", "c"},
			want:  result{Deltas: []string{"x"}, Reason: Stop, Matched: "ab", Tokens: 1},
		},
		{
			name:  "a later-starting stop string ends first",
			stops: []string{"abcd", "c"},
			toks:  []string{"ab", "c", "d"},
			want:  result{Deltas: []string{"", "ab"}, Reason: Stop, Matched: "c", Tokens: 2},
		},
		{
			name:  "self-overlapping stop string",
			stops: []string{"aab"},
			toks:  []string{"a", "a", "a", "b"},
			want:  result{Deltas: []string{"", "", "a", ""}, Reason: Stop, Matched: "aab", Tokens: 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var toks []tok
			for _, s := range tt.toks {
				toks = append(toks, text(s))
			}
			got := run(t, Params{MaxTokens: 100, StopStrings: tt.stops}, toks...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestHoldBackAndRelease(t *testing.T) {
	p := Params{MaxTokens: 100, StopStrings: []string{"STOP", "</answer>"}}
	got := run(t, p, text("x S"), text("T"), text("O"), text("x"), text(" </ans"), text("wer"), text("!"))
	want := result{Deltas: []string{"x ", "", "", "STOx", " ", "", "</answer!"}, Tokens: 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	var d Detector
	d.Reset(&p)
	d.Add(idText, []byte("ok </an"), false)
	if got := string(d.Finish(Cancelled)); got != "</an" {
		t.Errorf("Finish() released %q, want %q", got, "</an")
	}
	if d.FinishReason() != Cancelled {
		t.Errorf("FinishReason() = %v, want cancelled", d.FinishReason())
	}
	if delta, r := d.Add(idText, []byte("more"), false); delta != nil || r != Cancelled {
		t.Errorf("Add after finish = %q, %v; want nil, cancelled", delta, r)
	}
	if got := d.Finish(Error); got != nil {
		t.Errorf("second Finish() = %q, want nil", got)
	}
}

func TestFinishWithoutReason(t *testing.T) {
	var d Detector
	d.Reset(&Params{MaxTokens: 10})
	d.Finish(None)
	if d.FinishReason() != Error {
		t.Errorf("FinishReason() after Finish(None) = %v, want error", d.FinishReason())
	}
}

func TestUTF8(t *testing.T) {
	const emoji = "\U0001F600" // 4 bytes
	tests := []struct {
		name   string
		p      Params
		toks   []string
		finish bool // call Finish after the tokens
		want   []string
	}{
		{
			name: "two-byte rune split",
			toks: []string{"caf\xC3", "\xA9!"},
			want: []string{"caf", "é!"},
		},
		{
			name: "four-byte rune in four tokens",
			toks: []string{emoji[:1], emoji[1:2], emoji[2:3], emoji[3:] + "a"},
			want: []string{"", "", "", emoji + "a"},
		},
		{
			name:   "incomplete at the end becomes U+FFFD",
			toks:   []string{"ok", emoji[:3]},
			finish: true,
			want:   []string{"ok", "", "\uFFFD"},
		},
		{
			name: "ill-formed bytes in the middle become U+FFFD, one per maximal subpart",
			toks: []string{"a\xE2\x82", "b\xFFc"},
			want: []string{"a", "\uFFFDb\uFFFDc"},
		},
		{
			name: "stop string of multi-byte runes split inside a rune",
			p:    Params{StopStrings: []string{"終わり"}},
			toks: []string{"これで終", "わ"[:2], "わ"[2:] + "り です"},
			want: []string{"これで", "", ""},
		},
		{
			// Stop strings from JSON are valid UTF-8 and so only ever match
			// at rune boundaries; an ill-formed one can begin inside a rune,
			// and holding it back must not split that rune.
			name: "held-back stop prefix inside a rune holds the whole rune",
			p:    Params{StopStrings: []string{"\xA9x"}},
			toks: []string{"caf\xC3\xA9", "y"},
			want: []string{"caf", "éy"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			p.MaxTokens = 100
			var d Detector
			d.Reset(&p)
			var got []string
			for _, s := range tt.toks {
				delta, _ := d.Add(idText, []byte(s), false)
				got = append(got, string(delta))
			}
			if tt.finish {
				got = append(got, string(d.Finish(Stop)))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMaxResponseChars(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		stops []string
		toks  []string
		want  result
	}{
		{
			name:  "counts runes, not bytes",
			limit: 3,
			toks:  []string{"éé", "éé"},
			want:  result{Deltas: []string{"éé", "é"}, Reason: Length, Tokens: 2},
		},
		{
			name:  "reaching the limit exactly ends the request",
			limit: 4,
			toks:  []string{"ab", "cd", "ef"},
			want:  result{Deltas: []string{"ab", "cd"}, Reason: Length, Tokens: 2},
		},
		{
			name:  "held-back stop prefix does not count until it is text",
			limit: 4,
			stops: []string{"cdX"},
			toks:  []string{"ab", "cd", "X"},
			want:  result{Deltas: []string{"ab", "", ""}, Reason: Stop, Matched: "cdX", Tokens: 3},
		},
		{
			name:  "held-back stop prefix that turns out to be text",
			limit: 4,
			stops: []string{"cdX"},
			toks:  []string{"ab", "cd", "Y"},
			want:  result{Deltas: []string{"ab", "", "cd"}, Reason: Length, Tokens: 3},
		},
		{
			name:  "an incomplete rune does not count until complete",
			limit: 2,
			toks:  []string{"a\xC3", "\xA9b"},
			want:  result{Deltas: []string{"a", "é"}, Reason: Length, Tokens: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var toks []tok
			for _, s := range tt.toks {
				toks = append(toks, text(s))
			}
			got := run(t, Params{MaxTokens: 100, MaxResponseChars: tt.limit, StopStrings: tt.stops}, toks...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	// Finish releases held text, but not beyond the limit.
	var d Detector
	d.Reset(&Params{MaxTokens: 100, MaxResponseChars: 3, StopStrings: []string{"bcdX"}})
	first, _ := d.Add(idText, []byte("abcd"), false)
	got := string(first) // a delta is valid only until the next call
	got += string(d.Finish(Cancelled))
	if got != "abc" {
		t.Errorf("text = %q, want %q", got, "abc")
	}
	if d.Text() != 3 {
		t.Errorf("Text() = %d, want 3", d.Text())
	}
}

func TestResetReuse(t *testing.T) {
	var d Detector
	d.Reset(&Params{MaxTokens: 100, MinTokens: 1, StopStrings: []string{"END", "xyz"}, MaxResponseChars: 50})
	feed(&d, text("abc EN"), text("D"))
	d.Reset(&Params{MaxTokens: 3, StopStrings: []string{"Q"}})
	got := feed(&d, text("EN"), text("D xy"), text("z!"))
	want := result{Deltas: []string{"EN", "D xy", "z!"}, Reason: Length, Tokens: 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after Reset (-want +got):\n%s", diff)
	}
	if d.Text() != 8 {
		t.Errorf("Text() = %d, want 8", d.Text())
	}
}

func TestEmptyStopStringIgnored(t *testing.T) {
	got := run(t, Params{MaxTokens: 2, StopStrings: []string{"", "z"}}, text("a"), text("b"))
	want := result{Deltas: []string{"a", "b"}, Reason: Length, Tokens: 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDeltaCannotClobberHeldText(t *testing.T) {
	var d Detector
	d.Reset(&Params{MaxTokens: 100, StopStrings: []string{"STOP"}})
	delta, _ := d.Add(idText, []byte("abcST"), false)
	_ = append(delta, "XX"...) // a careless caller
	delta, r := d.Add(idText, []byte("OP"), false)
	if r != Stop || len(delta) != 0 {
		t.Errorf("Add = %q, %v; want empty, stop", delta, r)
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	p := Params{
		MaxTokens:        1 << 30,
		EOSTokenIDs:      []int32{idEOS},
		StopStrings:      []string{"</answer>", "\n\nUser:", "STOP"},
		MaxResponseChars: 1 << 30,
	}
	toks := benchTokens()
	var d Detector
	d.Reset(&p)
	for _, tk := range toks { // grow the buffers
		d.Add(idText, tk, false)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		if i%len(toks) == 0 {
			d.Reset(&p)
		}
		d.Add(idText, toks[i%len(toks)], false)
		i++
	})
	if allocs != 0 {
		t.Errorf("Add allocates %v times per token, want 0", allocs)
	}
}

// TestIncludeStopStr checks vLLM's include_stop_str_in_output: the stop
// string stays in the text (what follows it in the same token does not),
// nothing is held back for a possible stop string, and a stop token's text
// is kept.
func TestIncludeStopStr(t *testing.T) {
	base := Params{MaxTokens: 10, EOSTokenIDs: []int32{idEOS}, StopTokenIDs: []int32{idStop},
		StopStrings: []string{"##"}, IncludeStopStr: true}
	tests := []struct {
		name string
		toks []tok
		want result
	}{
		{
			name: "stop string within one token",
			toks: []tok{text("ab"), text("c##d")},
			want: result{Deltas: []string{"ab", "c##"}, Reason: Stop, Matched: "##", Tokens: 2},
		},
		{
			name: "stop string across tokens: its start is not held back",
			toks: []tok{text("ab#"), text("#cd")},
			want: result{Deltas: []string{"ab#", "#"}, Reason: Stop, Matched: "##", Tokens: 2},
		},
		{
			name: "stop token's text kept",
			toks: []tok{text("ab"), {id: idStop, text: "<|end|>"}},
			want: result{Deltas: []string{"ab", "<|end|>"}, Reason: Stop, Tokens: 2},
		},
		{
			name: "eos without text (a skipped special token) adds none",
			toks: []tok{text("ab"), {id: idEOS}},
			want: result{Deltas: []string{"ab", ""}, Reason: Stop, Tokens: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, run(t, base, tt.toks...)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
