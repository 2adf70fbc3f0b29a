package chatformat

import "testing"

// Cases rewritten from llama.cpp's tests/test-chat.cpp (test_lfm2_parser)
// and vLLM's tests/tool_parsers/test_pythonic_tool_parser.py and
// test_llama4_pythonic_tool_parser.py, fed in pieces of every size.

func TestPythonic(t *testing.T) {
	const moreTypes = `{"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"}, "role": null, "passed_test": true, "aliases": ["John", "Johnny"]}`
	cases := []parseCase{
		{name: "content", out: "How can I help you today?", opts: withCalls, want: Result{Content: "How can I help you today?"}},
		{name: "simple", out: "[get_weather(city='San Francisco', metric='celsius')]", opts: withCalls,
			want: Result{Calls: calls("get_weather", `{"city": "San Francisco", "metric": "celsius"}`)}},
		{name: "more types", out: "[register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, passed_test=True, aliases=['John', 'Johnny'])]", opts: withCalls,
			want: Result{Calls: calls("register_user", moreTypes)}},
		{name: "empty args", out: "[get_weather()]", opts: withCalls, want: Result{Calls: calls("get_weather", `{}`)}},
		{name: "empty dict", out: "[do_something_cool(additional_data={})]", opts: withCalls, want: Result{Calls: calls("do_something_cool", `{"additional_data": {}}`)}},
		{name: "empty list", out: "[do_something_cool(steps=[])]", opts: withCalls, want: Result{Calls: calls("do_something_cool", `{"steps": []}`)}},
		{name: "escaped strings", out: `[get_weather(city='Martha\'s Vineyard', metric='\"cool units\"')]`, opts: withCalls,
			want: Result{Calls: calls("get_weather", `{"city": "Martha's Vineyard", "metric": "\"cool units\""}`)}},
		{name: "parallel", out: "[get_weather(city='San Francisco', metric='celsius'), register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, passed_test=True, aliases=['John', 'Johnny'])]", opts: withCalls,
			want: Result{Calls: calls("get_weather", `{"city": "San Francisco", "metric": "celsius"}`, "register_user", moreTypes)}},
		{name: "llama4 markers", out: "<|python_start|>[get_weather(city='LA', metric='C')]<|python_end|>", opts: withCalls,
			want: Result{Calls: calls("get_weather", `{"city": "LA", "metric": "C"}`)}},
		{name: "numbers", out: "[f(a=-1, b=2.5, c=1., d=.5, e=1e3, f=1_000, g=+3, h=0x1f, i=(1, 2), j=[], k={1: 'x'})]", opts: withCalls,
			want: Result{Calls: calls("f", `{"a": -1, "b": 2.5, "c": 1, "d": 0.5, "e": 1e3, "f": 1000, "g": 3, "h": 31, "i": [1, 2], "j": [], "k": {"1": "x"}}`)}},
		{name: "escapes", out: `[f(s="a\tb\\c\x41\u00e9\U0001F600\101", t='''x'y"z''', u="\q")]`, opts: withCalls,
			want: Result{Calls: calls("f", `{"s": "a\tb\\cA\u00e9\ud83d\ude00A", "t": "x'y\"z", "u": "\\q"}`)}},
		{name: "json literals", out: `[set_config(config={"enabled": true, "note": null, "off": false})]`, opts: withCalls,
			want: Result{Calls: calls("set_config", `{"config": {"enabled": true, "note": null, "off": false}}`)}},
		{name: "trailing commas and newlines", out: "[\n  f(\n    a=[1, 2,],\n    b={'x': 1,},\n  ),\n]", opts: withCalls,
			want: Result{Calls: calls("f", `{"a": [1, 2], "b": {"x": 1}}`)}},
		{name: "text after the list", out: "[f(a=1)] done", opts: withCalls, want: Result{Calls: calls("f", `{"a": 1}`), Content: " done"}},
		{name: "markdown link is text", out: "[link text](url) and [Wikipedia](https://www.wikipedia.org).", opts: withCalls,
			want: Result{Content: "[link text](url) and [Wikipedia](https://www.wikipedia.org)."}},
		{name: "list answer is text", out: "[1, 2, 3]", opts: withCalls, want: Result{Content: "[1, 2, 3]"}},
		{name: "unquoted string is text", out: "[get_weather(city=San Francisco)]", opts: withCalls, want: Result{Content: "[get_weather(city=San Francisco)]"}},
		{name: "positional argument is text", out: "[f(1)]", opts: withCalls, want: Result{Content: "[f(1)]"}},
		{name: "nested call is text", out: "[f(a=g(b=1))]", opts: withCalls, want: Result{Content: "[f(a=g(b=1))]"}},
		{name: "repeated argument is text", out: "[f(a=1, a=2)]", opts: withCalls, want: Result{Content: "[f(a=1, a=2)]"}},
		{name: "cut list is text", out: "[special_function(arg1=", opts: withCalls, want: Result{Content: "[special_function(arg1="}},
		{name: "bracket inside a string", out: "[f(a=')]', b=\"[(\")]", opts: withCalls, want: Result{Calls: calls("f", `{"a": ")]", "b": "[("}`)}},
		{name: "no tools: a list is text", out: "[get_weather(city='LA')]", want: Result{Content: "[get_weather(city='LA')]"}},
	}
	runCases(t, "pythonic", "", cases)
}

func TestLFM2(t *testing.T) {
	runCases(t, "lfm2", "", []parseCase{
		{name: "content", out: "Hello, world!\nWhat's up?", opts: withCalls, want: Result{Content: "Hello, world!\nWhat's up?"}},
		{name: "call", out: "<|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "string argument", out: `<|tool_call_start|>[get_time(city="XYZCITY")]<|tool_call_end|>`, opts: withCalls,
			want: Result{Calls: calls("get_time", `{"city": "XYZCITY"}`)}},
		{name: "python literals", out: "<|tool_call_start|>[toggle(enabled=True)]<|tool_call_end|>", opts: withCalls,
			want: Result{Calls: calls("toggle", `{"enabled": true}`)}},
		{name: "none", out: "<|tool_call_start|>[set_nullable(value=None)]<|tool_call_end|>", opts: withCalls,
			want: Result{Calls: calls("set_nullable", `{"value": null}`)}},
		{name: "nested", out: `<|tool_call_start|>[set_config(config={"enabled": True, "count": 3})]<|tool_call_end|>`, opts: withCalls,
			want: Result{Calls: calls("set_config", `{"config": {"enabled": true, "count": 3}}`)}},
		{name: "dotted name", out: `<|tool_call_start|>[Calendar.create_event(title="demo", participants=["Alice", "Bob"], metadata={"priority": "high", "reminder": true})]<|tool_call_end|>`, opts: withCalls,
			want: Result{Calls: calls("Calendar.create_event", `{"title": "demo", "participants": ["Alice", "Bob"], "metadata": {"priority": "high", "reminder": true}}`)}},
		{name: "multiline code", out: `<|tool_call_start|>[python(code="def hello():\n    print('hey')")]<|tool_call_end|>`, opts: withCalls,
			want: Result{Calls: calls("python", `{"code": "def hello():\n    print('hey')"}`)}},
		{name: "escaped quotes", out: `<|tool_call_start|>[python(code="print(\"hi\")")]<|tool_call_end|>`, opts: withCalls,
			want: Result{Calls: calls("python", `{"code": "print(\"hi\")"}`)}},
		{name: "content before", out: `Let me check the time.<|tool_call_start|>[get_time(city="Paris")]<|tool_call_end|>`, opts: withCalls,
			want: Result{Content: "Let me check the time.", Calls: calls("get_time", `{"city": "Paris"}`)}},
		{name: "parallel", out: "<|tool_call_start|>[special_function(arg1=1), special_function_with_opt(arg1=1, arg2=2)]<|tool_call_end|>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`, "special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
		{name: "two lists and text", out: "A<|tool_call_start|>[f(a=1)]<|tool_call_end|>B<|tool_call_start|>[g()]<|tool_call_end|>", opts: withCalls,
			want: Result{Content: "AB", Calls: calls("f", `{"a": 1}`, "g", `{}`)}},
		{name: "empty args", out: "<|tool_call_start|>[empty_args()]<|tool_call_end|>", opts: withCalls, want: Result{Calls: calls("empty_args", `{}`)}},
		{name: "markdown links stay content", out: "Use this format: [link text](url). Example: [Wikipedia](https://www.wikipedia.org).", opts: withCalls,
			want: Result{Content: "Use this format: [link text](url). Example: [Wikipedia](https://www.wikipedia.org)."}},
		{name: "malformed marked list is text", out: "<|tool_call_start|>[f(x)]<|tool_call_end|>", opts: withCalls,
			want: Result{Content: "<|tool_call_start|>[f(x)]<|tool_call_end|>"}},
		{name: "cut marked list is text", out: "<|tool_call_start|>[special_function(arg1=", opts: withCalls,
			want: Result{Content: "<|tool_call_start|>[special_function(arg1="}},
		{name: "marker without a list is text", out: "<|tool_call_start|> no", opts: withCalls, want: Result{Content: "<|tool_call_start|> no"}},
	})
	// LFM2.5-8B-A1B thinks: reasoning, then a call.
	runCases(t, "lfm2", ReasoningThink, []parseCase{
		{name: "reasoning then call", out: "<think>I'm\nthinking</think><|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>",
			opts: Options{Calls: true, Reasoning: true}, want: Result{Reasoning: "I'm\nthinking", Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "reasoning then content", out: "<think>I'm\nthinking</think>Hello, world!\nWhat's up?",
			opts: Options{Calls: true, Reasoning: true}, want: Result{Reasoning: "I'm\nthinking", Content: "Hello, world!\nWhat's up?"}},
	})
}
