package chatformat

import "testing"

// Cases rewritten from llama.cpp's tests/test-chat.cpp and vLLM's
// tests/tool_parsers and tests/reasoning.

func TestHermes(t *testing.T) {
	runCases(t, "hermes", "", []parseCase{
		{name: "content", out: "Hello, world!\nWhat's up?", opts: withCalls, want: Result{Content: "Hello, world!\nWhat's up?"}},
		{name: "call", out: "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "content then two calls", out: "Let me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\": \"}\"}]}}\n</tool_call>\n<tool_call>\n{\"arguments\": {}, \"name\": \"b\"}\n</tool_call>", opts: withCalls,
			want: Result{Content: "Let me look.", Calls: calls("a", `{"x": [1, {"y": "}"}]}`, "b", `{}`)}},
		{name: "cut before name is markup", out: "<tool_call>\n{\"na", opts: withCalls, want: Result{}},
		{name: "string arguments", out: "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", opts: withCalls,
			want: Result{Calls: calls("f", `{"a": 1}`)}},
		{name: "no tools: markup is text", out: "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
			want: Result{Content: "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"}},
	})
}

func TestLlama3JSONAndMistral(t *testing.T) {
	runCases(t, "llama3_json", "", []parseCase{
		{name: "call", out: "{\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", opts: withCalls, want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "python tag", out: "<|python_tag|>{\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", opts: withCalls, want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "json answer", out: "{\"answer\": 42}", opts: withCalls, want: Result{Content: "{\"answer\": 42}"}},
		{name: "text", out: "Hello {x}", opts: withCalls, want: Result{Content: "Hello {x}"}},
	})
	runCases(t, "mistral", "", []parseCase{
		{name: "calls", out: "[TOOL_CALLS] [{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}, {\"name\": \"b\", \"arguments\": {}}]", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`, "b", `{}`)}},
		{name: "list answer", out: "[1, 2, 3]", opts: withCalls, want: Result{Content: "[1, 2, 3]"}},
	})
	runCases(t, "mistral_args", "", []parseCase{
		{name: "call", out: "[TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}", opts: withCalls, want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "content then two calls", out: "Sure.[TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}[TOOL_CALLS]special_function_with_opt[ARGS]{\"arg1\": 1, \"arg2\": 2}", opts: withCalls,
			want: Result{Content: "Sure.", Calls: calls("special_function", `{"arg1": 1}`, "special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
		{name: "malformed name kept", out: "[TOOL_CALLS]not a name[ARGS]x", opts: withCalls, want: Result{Content: "[TOOL_CALLS]not a name[ARGS]x"}},
	})
}

func TestQwen3Coder(t *testing.T) {
	const call1 = "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>"
	const call2 = "<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>"
	runCases(t, "qwen3_coder", "", []parseCase{
		{name: "content", out: "Hello, world!\nWhat's up?", opts: withCalls, want: Result{Content: "Hello, world!\nWhat's up?"}},
		{name: "call", out: call1, opts: withCalls, want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "call without opening tag", out: "<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "content then call without opening tag", out: "Let me call it.\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Content: "Let me call it.", Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "two calls", out: call1 + "\n" + call2, opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`, "special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
		{name: "multiline code", out: "<tool_call>\n<function=python>\n<parameter=code>\ndef hello():\n    print(\"Hello, world!\")\n\nhello()\n</parameter>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("python", "{\"code\": \"def hello():\\n    print(\\\"Hello, world!\\\")\\n\\nhello()\"}")}},
		{name: "unicode", out: "<tool_call>\n<function=python>\n<parameter=code>\n格\n</parameter>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("python", `{"code": "格"}`)}},
		{name: "html value", out: "<tool_call>\n<function=html>\n<parameter=markup>\n<html>\n <head>\n  <title>Hello!</title>\n </head>\n</html>\n</parameter>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("html", "{\"markup\": \"<html>\\n <head>\\n  <title>Hello!</title>\\n </head>\\n</html>\"}")}},
		{name: "value ending in newline", out: "<tool_call>\n<function=edit>\n<parameter=filename>\nfoo.c\n</parameter>\n<parameter=oldString>\n#iclunde\n</parameter>\n<parameter=newString>\n#include\n\n</parameter>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("edit", "{\"filename\": \"foo.c\", \"oldString\": \"#iclunde\", \"newString\": \"#include\\n\"}")}},
		{name: "indented value", out: "<tool_call>\n<function=python>\n<parameter=code>\n    print(\"Hello, world!\")\n</parameter>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("python", "{\"code\": \"    print(\\\"Hello, world!\\\")\"}")}},
		{name: "typed values", out: "<tool_call>\n<function=typed>\n<parameter=n>\n1.5\n</parameter>\n<parameter=b>\nTrue\n</parameter>\n<parameter=o>\n{\"k\": [1]}\n</parameter>\n<parameter=a>\n[1, 2]\n</parameter>\n<parameter=s>\n42\n</parameter>\n<parameter=u>\nnull\n</parameter>\n<parameter=extra>\n7\n</parameter>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("typed", `{"n": 1.5, "b": true, "o": {"k": [1]}, "a": [1, 2], "s": "42", "u": null, "extra": "7"}`)}},
		{name: "bad typed value kept as string", out: "<tool_call>\n<function=special_function>\n<parameter=arg1>\none\n</parameter>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": "one"}`)}},
		{name: "unknown tool values read as JSON", out: "<tool_call>\n<function=other>\n<parameter=x>\n3\n</parameter>\n<parameter=y>\nhi\n</parameter>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("other", `{"x": 3, "y": "hi"}`)}},
		{name: "no arguments", out: "<tool_call>\n<function=read_file_diff_md>\n</function>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("read_file_diff_md", `{}`)}},
		{name: "malformed markup is text", out: "<tool_call>\nnot a call\n</tool_call>", opts: withCalls,
			want: Result{Content: "<tool_call>\nnot a call\n</tool_call>"}},
		{name: "cut inside a value keeps what came", out: "<tool_call>\n<function=python>\n<parameter=code>\nprint(1)", opts: withCalls,
			want: Result{Calls: calls("python", `{"code": "print(1)"}`)}},
		{name: "cut before the name is markup", out: "<tool_call>\n<functi", opts: withCalls, want: Result{}},
		{name: "no tools: markup is text", out: call1, want: Result{Content: call1}},
	})
}

func TestThink(t *testing.T) {
	const xmlCall = "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>"
	think := Options{Reasoning: true}
	forced := Options{Reasoning: true, InReasoning: true}
	forcedCalls := Options{Reasoning: true, InReasoning: true, Calls: true}
	runCases(t, "", ReasoningThink, []parseCase{
		{name: "thoughts", out: "<think>I'm\nthinking</think>Hello, world!\nWhat's up?", opts: think, want: Result{Reasoning: "I'm\nthinking", Content: "Hello, world!\nWhat's up?"}},
		{name: "blanks around", out: "\n<think>\nI'm\nthinking\n</think>\n\nHello, world!", opts: think, want: Result{Reasoning: "I'm\nthinking", Content: "Hello, world!"}},
		{name: "opened by the prompt", out: "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?", opts: forced, want: Result{Reasoning: "I'm\nthinking", Content: "Hello, world!\nWhat's up?"}},
		{name: "no reasoning", out: "Hello <think> there", opts: think, want: Result{Content: "Hello <think> there"}},
		{name: "reasoning off: markup is text", out: "<think>x</think>y", want: Result{Content: "<think>x</think>y"}},
		{name: "cut in reasoning", out: "<think>I'm\nthinking</thi", opts: think, want: Result{Reasoning: "I'm\nthinking</thi"}},
		{name: "empty reasoning", out: "<think>\n\n</think>\n\nHi", opts: think, want: Result{Content: "Hi"}},
		// DeepSeek-R1: no <think> in the output, the prompt opened it.
		{name: "r1 forced open", out: "Let me think.</think>The answer is 4.", opts: forced, want: Result{Reasoning: "Let me think.", Content: "The answer is 4."}},
	})
	runCases(t, "qwen3_coder", ReasoningThink, []parseCase{
		{name: "reasoning then call", out: "I'm\nthinking\n</think>\n\n" + xmlCall, opts: forcedCalls,
			want: Result{Reasoning: "I'm\nthinking", Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "call ends opened reasoning", out: xmlCall, opts: forcedCalls, want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "call after thoughts without close", out: "Need to inspect.\n" + xmlCall, opts: forcedCalls,
			want: Result{Reasoning: "Need to inspect.", Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "calls in reasoning are not calls when closed", out: "<think>maybe <function=x> later</think>ok", opts: Options{Reasoning: true, Calls: true},
			want: Result{Reasoning: "maybe <function=x> later", Content: "ok"}},
		{name: "json answer after reasoning", out: "I need to output the invoice details in JSON\n</think>\n\n{\"amount\": 123.45, \"date\": \"2025-12-03\"}", opts: forced,
			want: Result{Reasoning: "I need to output the invoice details in JSON", Content: `{"amount": 123.45, "date": "2025-12-03"}`}},
	})
	runCases(t, "hermes", ReasoningThink, []parseCase{
		{name: "qwen3 thoughts then call", out: "<think>\nI'll call it.\n</think>\n\n<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>", opts: Options{Reasoning: true, Calls: true},
			want: Result{Reasoning: "I'll call it.", Calls: calls("special_function", `{"arg1": 1}`)}},
	})
}

func TestGLM45(t *testing.T) {
	forcedCalls := Options{Reasoning: true, InReasoning: true, Calls: true}
	runCases(t, "glm45", ReasoningThink, []parseCase{
		{name: "4.6 call", out: "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "4.7 call", out: "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "4.7 reasoning then call", out: "I'm\nthinking</think><tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>", opts: forcedCalls,
			want: Result{Reasoning: "I'm\nthinking", Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "4.7 reasoning then content", out: "I'm\nthinking</think>Hello, world!\nWhat's up?", opts: Options{Reasoning: true, InReasoning: true},
			want: Result{Reasoning: "I'm\nthinking", Content: "Hello, world!\nWhat's up?"}},
		{name: "two calls", out: "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call><tool_call>special_function_with_opt<arg_key>arg1</arg_key><arg_value>1</arg_value><arg_key>arg2</arg_key><arg_value>2</arg_value></tool_call>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`, "special_function_with_opt", `{"arg1": 1, "arg2": 2}`)}},
		{name: "no arguments", out: "Let me read the diff content.</think><tool_call>read_file_diff_md</tool_call>", opts: forcedCalls,
			want: Result{Reasoning: "Let me read the diff content.", Calls: calls("read_file_diff_md", `{}`)}},
		{name: "string and json values", out: "<tool_call>typed\n<arg_key>s</arg_key>\n<arg_value>a b</arg_value>\n<arg_key>o</arg_key>\n<arg_value>{\"k\": 1}</arg_value>\n</tool_call>", opts: withCalls,
			want: Result{Calls: calls("typed", `{"s": "a b", "o": {"k": 1}}`)}},
		{name: "malformed is text", out: "<tool_call>\n</tool_call>", opts: withCalls, want: Result{Content: "<tool_call>\n</tool_call>"}},
	})
}

func TestHarmony(t *testing.T) {
	o := Options{Calls: true, Reasoning: true}
	runCases(t, "harmony", ReasoningHarmony, []parseCase{
		{name: "final", out: "<|channel|>final<|message|>Hello, world!\nWhat's up?", opts: o, want: Result{Content: "Hello, world!\nWhat's up?"}},
		{name: "commentary", out: "<|channel|>commentary<|message|>Hello, world!\nWhat's up?", opts: o, want: Result{Content: "Hello, world!\nWhat's up?"}},
		{name: "analysis then final", out: "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?<|return|>", opts: o,
			want: Result{Reasoning: "I'm\nthinking", Content: "Hello, world!\nWhat's up?"}},
		{name: "analysis only", out: "<|channel|>analysis<|message|>I'm\nthinking", opts: o, want: Result{Reasoning: "I'm\nthinking"}},
		{name: "recipient in role", out: " to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}", opts: o, want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "recipient in channel", out: "<|channel|>analysis to=functions.special_function<|message|>{\"arg1\": 1}", opts: o, want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "constrain", out: " to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}", opts: o, want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "commentary call", out: "<|channel|>commentary to=functions.special_function<|message|>{\"arg1\": 1}<|call|>", opts: o, want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "reasoning then call", out: "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant to=functions.special_function<|channel|>analysis<|message|>{\"arg1\": 1}", opts: o,
			want: Result{Reasoning: "I'm\nthinking", Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "edit", out: "<|channel|>analysis<|message|>Thinking about edit...<|end|><|start|>assistant<|channel|>commentary to=functions.edit <|constrain|>json<|message|>{\"oldString\": \"if (part < railCount - 1) {\", \"newString\": \"if (part < 4) {\", \"replaceAll\": false}", opts: o,
			want: Result{Reasoning: "Thinking about edit...", Calls: calls("edit", `{"oldString": "if (part < railCount - 1) {", "newString": "if (part < 4) {", "replaceAll": false}`)}},
		{name: "structured final", out: "<|channel|>analysis<|message|>I need to output the invoice details in JSON<|end|><|start|>assistant<|channel|>final <|constrain|>json<|message|>{\"amount\": 123.45, \"date\": \"2025-12-03\"}", opts: o,
			want: Result{Reasoning: "I need to output the invoice details in JSON", Content: `{"amount": 123.45, "date": "2025-12-03"}`}},
		{name: "builtin recipient in role", out: "<|channel|>analysis<|message|>I will execute python to say hello<|end|><|start|>assistant to=container.exec<|channel|>commentary<|message|>python3 -c 'print(\"hello\")'", opts: o,
			want: Result{Reasoning: "I will execute python to say hello"}},
		{name: "builtin recipient in channel", out: "<|channel|>analysis<|message|>I will execute python to say hello<|end|><|start|>assistant<|channel|>commentary to=python <|constrain|>code<|message|>print(\"hello\")", opts: o,
			want: Result{Reasoning: "I will execute python to say hello"}},
		{name: "to=assistant before reasoning", out: "<|channel|>commentary to=assistant<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>final<|message|>Hello, world!\nWhat's up?", opts: o,
			want: Result{Reasoning: "I'm\nthinking", Content: "Hello, world!\nWhat's up?"}},
		{name: "to=assistant before final", out: "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary to=assistant<|channel|>final<|message|>Hello, world!\nWhat's up?", opts: o,
			want: Result{Reasoning: "I'm\nthinking", Content: "Hello, world!\nWhat's up?"}},
		{name: "plain text", out: "Hello, world!", opts: o, want: Result{Content: "Hello, world!"}},
		{name: "two calls", out: "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.b <|constrain|>json<|message|>{\"x\": 1}<|call|>", opts: o,
			want: Result{Calls: calls("a", `{}`, "b", `{"x": 1}`)}},
	})
}

func TestMiniMaxM2(t *testing.T) {
	forcedCalls := Options{Reasoning: true, InReasoning: true, Calls: true}
	runCases(t, "minimax_m2", ReasoningThink, []parseCase{
		{name: "content after empty reasoning", out: "\n</think>\n\nHello, world!\nWhat's up?", opts: forcedCalls, want: Result{Content: "Hello, world!\nWhat's up?"}},
		{name: "thoughts", out: "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?", opts: forcedCalls, want: Result{Reasoning: "I'm\nthinking", Content: "Hello, world!\nWhat's up?"}},
		{name: "empty args", out: "Let's call a tool:\n</think>\n\n<minimax:tool_call>\n<invoke name=\"empty_args\">\n</invoke>\n</minimax:tool_call>", opts: forcedCalls,
			want: Result{Reasoning: "Let's call a tool:", Calls: calls("empty_args", `{}`)}},
		{name: "call", out: "\n</think>\n\n<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</parameter>\n</invoke>\n</minimax:tool_call>", opts: forcedCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "two invokes in one block", out: "<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter name=\"arg1\">1</parameter>\n</invoke>\n<invoke name=\"python\">\n<parameter name=\"code\">print(\"<x>\")</parameter>\n</invoke>\n</minimax:tool_call>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`, "python", `{"code": "print(\"<x>\")"}`)}},
	})
}

func TestDeepSeekV31AndKimiK2(t *testing.T) {
	const ds = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜>"
	forcedCalls := Options{Reasoning: true, InReasoning: true, Calls: true}
	runCases(t, "deepseek_v31", ReasoningThink, []parseCase{
		{name: "call", out: ds + "<｜tool▁calls▁end｜>", opts: withCalls, want: Result{Calls: calls("get_time", `{"city": "Paris"}`)}},
		{name: "reasoning then call", out: "REASONING</think>" + ds + "<｜tool▁calls▁end｜>", opts: forcedCalls,
			want: Result{Reasoning: "REASONING", Calls: calls("get_time", `{"city": "Paris"}`)}},
		{name: "reasoning, content, two calls", out: "REASONING</think>CONTENT" + ds + "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", opts: forcedCalls,
			want: Result{Reasoning: "REASONING", Content: "CONTENT", Calls: calls("get_time", `{"city": "Paris"}`, "get_weather", `{"city": "Paris"}`)}},
		{name: "content", out: "CONTENT", opts: withCalls, want: Result{Content: "CONTENT"}},
		{name: "cut in arguments", out: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"city\"", opts: withCalls,
			want: Result{Calls: calls("get_time", `{"city"`)}},
	})
	runCases(t, "kimi_k2", ReasoningThink, []parseCase{
		{name: "call", out: "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "thoughts, content, two calls", out: "<think>I'm\nthinking</think>Hello<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{}<|tool_call_end|>" +
			"<|tool_call_begin|>functions.b:1<|tool_call_argument_begin|>{\"x\": [1]}<|tool_call_end|><|tool_calls_section_end|>", opts: Options{Reasoning: true, Calls: true},
			want: Result{Reasoning: "I'm\nthinking", Content: "Hello", Calls: calls("a", `{}`, "b", `{"x": [1]}`)}},
		{name: "malformed id is text", out: "<|tool_calls_section_begin|><|tool_call_begin|>not a name<|tool_call_argument_begin|>x", opts: withCalls,
			want: Result{Content: "<|tool_calls_section_begin|><|tool_call_begin|>not a name<|tool_call_argument_begin|>x"}},
	})
}

func TestDeepSeekR1(t *testing.T) {
	forced := Options{Reasoning: true, InReasoning: true, Calls: true}
	runCases(t, "deepseek_r1", ReasoningThink, []parseCase{
		{name: "content after empty reasoning", out: "</think>Hello, world!\nWhat's up?", opts: forced, want: Result{Content: "Hello, world!\nWhat's up?"}},
		{name: "thoughts", out: "I'm\nthinking</think>Hello, world!\nWhat's up?", opts: forced, want: Result{Reasoning: "I'm\nthinking", Content: "Hello, world!\nWhat's up?"}},
		{name: "call after reasoning", out: "</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", opts: forced,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
		{name: "call", out: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", opts: withCalls,
			want: Result{Calls: calls("special_function", `{"arg1": 1}`)}},
	})
}
