#!/usr/bin/env python3
"""Render llama.cpp's chat templates with Python Jinja2 as Hugging Face
transformers' apply_chat_template does, for the Go renderer's golden test
(internal/runtime/model/jinja_fixtures_test.go).

Regenerate (python3 with Jinja2 3.1.x, stdlib otherwise) with
`make jinja-fixtures`, or:

    export KVPILOT_LLAMA_CPP_DIR=$(hack/setup-llama-cpp.sh)
    python3 hack/jinja-fixtures.py

It copies every models/templates/*.jinja of the llama.cpp tree into
internal/runtime/model/testdata/jinja2/templates/ and writes, per template,
testdata/jinja2/expected/<template>.json: the BOS/EOS texts it was given and,
per conversation of testdata/jinja2/conversations.json, the rendered text or
the exception it raised. It also renders the focused snippets of
internal/runtime/jinja/testdata/snippets.json (template and variables) into
snippets.expected.json there, for the engine's own tests.

The environment is transformers' (src/transformers/utils/chat_template_utils.py):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with
loopcontrols and the {% generation %} tag, tojson as json.dumps with
ensure_ascii=False, raise_exception, strftime_now; the clock is fixed so the
renders are deterministic. Messages are given as the kvpilot runtime gives
them (see normalize).
"""

import datetime
import glob
import json
import os
import shutil
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "internal/runtime/model/testdata/jinja2")

# The fixed clock of strftime_now; the Go test sets JinjaTemplate.Now to it.
NOW = datetime.datetime(2026, 11, 23, 12, 0, 0)

# BOS and EOS texts by template family: the first entry whose key is in the
# lower-cased file name wins (the tokens the family's tokenizer_config
# names).
SPECIAL_TOKENS = [
    ("deepseek", ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")),
    ("llama-3", ("<|begin_of_text|>", "<|eot_id|>")),
    ("hermes", ("<|begin_of_text|>", "<|eot_id|>")),
    ("firefunction", ("<|begin_of_text|>", "<|eot_id|>")),
    ("functionary", ("<|begin_of_text|>", "<|eot_id|>")),
    ("qwen", ("", "<|im_end|>")),
    ("qwq", ("", "<|im_end|>")),
    ("gemma", ("<bos>", "<eos>")),
    ("cohere", ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>")),
    ("phi-3", ("<s>", "<|endoftext|>")),
    ("lfm", ("<|startoftext|>", "<|im_end|>")),
    ("seed-oss", ("<seed:bos>", "<seed:eos>")),
    ("minimax", ("]~!b[", "[e~[")),
    ("granite", ("<|end_of_text|>", "<|end_of_text|>")),
    ("gpt-oss", ("<|startoftext|>", "<|return|>")),
    ("glm", ("", "<|endoftext|>")),
    ("kimi", ("[BOS]", "[EOS]")),
    ("rwkv", ("", "\n\n")),
]
DEFAULT_TOKENS = ("<s>", "</s>")


def special_tokens(name):
    lower = name.lower()
    for key, toks in SPECIAL_TOKENS:
        if key in lower:
            return toks
    return DEFAULT_TOKENS


class TemplateException(Exception):
    """What raise_exception raises (transformers raises TemplateError)."""


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return NOW.strftime(fmt)


class AssistantTracker(Extension):
    """transformers' {% generation %} tag: renders its body (transformers
    also records where, for assistant masks, which a prompt does not use)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def normalize(source, messages):
    """The runtime's rules (llama.cpp's) for what a message carries: null
    content (common/chat.cpp requires_non_null_content): an assistant
    message that only calls tools has content "" where the template renders
    tool calls, None elsewhere; and gpt-oss's "thinking" field."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None and m.get("tool_calls") and "tool_calls" in source:
            m["content"] = ""
        # gpt-oss (llama.cpp's common/parsers/gpt-oss.cpp): its template
        # reads past reasoning from "thinking", and a message that calls
        # tools carries no content beside it.
        if "<|channel|>" in source and "message.thinking" in source and isinstance(m.get("reasoning_content"), str):
            m["thinking"] = m["reasoning_content"]
            if m.get("tool_calls"):
                m.pop("content", None)
        out.append(m)
    return out


def render_snippet(env, snippet):
    try:
        tmpl = env.from_string(snippet["template"])
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"parse_error": f"{e.message} (line {e.lineno})"}
    try:
        return {"output": tmpl.render(**snippet["vars"])}
    except Exception as e:  # noqa: BLE001 - any refusal is recorded
        return {"error": f"{type(e).__name__}: {e}"}


def render_snippets(env):
    d = os.path.join(ROOT, "internal/runtime/jinja/testdata")
    with open(os.path.join(d, "snippets.json"), encoding="utf-8") as f:
        snippets = json.load(f)
    out = {s["name"]: render_snippet(env, s) for s in snippets}
    with open(os.path.join(d, "snippets.expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    print(f"rendered {len(snippets)} snippets")


def render(env, source, conv, bos, eos):
    try:
        tmpl = env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"parse_error": f"{e.message} (line {e.lineno})"}
    except Exception as e:  # noqa: BLE001 - any refusal is recorded
        return {"parse_error": f"{type(e).__name__}: {e}"}
    kwargs = {
        "messages": normalize(source, conv["messages"]),
        "tools": conv.get("tools"),
        "documents": None,
        "add_generation_prompt": conv.get("add_generation_prompt", False),
        "bos_token": bos,
        "eos_token": eos,
    }
    # chat_template_kwargs, as transformers passes them: template variables.
    kwargs.update(conv.get("kwargs", {}))
    try:
        return {"output": tmpl.render(**kwargs)}
    except jinja2.exceptions.TemplateError as e:
        # raise_exception's TemplateError is exactly TemplateError; Jinja's
        # own errors are subclasses (UndefinedError, SecurityError, ...).
        if type(e) is jinja2.exceptions.TemplateError:
            return {"raise_exception": str(e)}
        return {"error": f"{type(e).__name__}: {e}"}
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    llama = os.environ.get("KVPILOT_LLAMA_CPP_DIR")
    if not llama:
        sys.exit("set KVPILOT_LLAMA_CPP_DIR (export KVPILOT_LLAMA_CPP_DIR=$(hack/setup-llama-cpp.sh))")
    src_dir = os.path.join(llama, "llama.cpp", "models", "templates")
    with open(os.path.join(OUT, "conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)
    tmpl_dir = os.path.join(OUT, "templates")
    exp_dir = os.path.join(OUT, "expected")
    for d in (tmpl_dir, exp_dir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    env = environment()
    paths = sorted(glob.glob(os.path.join(src_dir, "*.jinja")))
    for path in paths:
        name = os.path.basename(path)[: -len(".jinja")]
        shutil.copyfile(path, os.path.join(tmpl_dir, name + ".jinja"))
        with open(path, encoding="utf-8") as f:
            source = f.read()
        bos, eos = special_tokens(name)
        cases = {case: render(env, source, conv, bos, eos) for case, conv in convs.items()}
        with open(os.path.join(exp_dir, name + ".json"), "w", encoding="utf-8") as f:
            json.dump({"bos_token": bos, "eos_token": eos, "cases": cases}, f, ensure_ascii=False, indent=1, sort_keys=True)
            f.write("\n")
    print(f"rendered {len(paths)} templates x {len(convs)} conversations (Jinja2 {jinja2.__version__})")
    render_snippets(env)


if __name__ == "__main__":
    main()
