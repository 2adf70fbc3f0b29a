#!/usr/bin/env python3
"""Import the inputs of llama.cpp's Jinja engine tests (tests/test-jinja.cpp:
each test_template's name, template and variables) into
internal/runtime/jinja/testdata/snippets.json as "llamacpp/<name>" snippets.
Only the inputs are taken: what a snippet must render is what Python's
Jinja2 renders (hack/jinja-fixtures.py writes it), not llama.cpp's
expectation. Tests whose variables are not plain JSON initializers are
skipped (listed on stderr).

    export KVPILOT_LLAMA_CPP_DIR=$(hack/setup-llama-cpp.sh)
    python3 hack/jinja-llamacpp-cases.py && make jinja-fixtures

The C++ initializers follow nlohmann::json's rule: a braced list whose
elements are all two-element lists starting with a string is an object.
"""
import re, json, sys
import os
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
llama = os.environ.get("KVPILOT_LLAMA_CPP_DIR")
if not llama:
    sys.exit("set KVPILOT_LLAMA_CPP_DIR (export KVPILOT_LLAMA_CPP_DIR=$(hack/setup-llama-cpp.sh))")
src = open(os.path.join(llama, "llama.cpp", "tests", "test-jinja.cpp"), encoding="utf-8").read()

def tokens(s, i):
    """C++ tokens from position i."""
    n = len(s)
    while i < n:
        c = s[i]
        if c.isspace():
            i += 1; continue
        if s.startswith('//', i):
            i = s.index('\n', i); continue
        if c == '"':
            j = i + 1; out = []
            while s[j] != '"':
                if s[j] == '\\':
                    e = s[j+1]
                    m = {'n':'\n','t':'\t','r':'\r','\\':'\\','"':'"',"'":"'",'0':'\0'}
                    if e in m: out.append(m[e]); j += 2; continue
                    if e == 'u':
                        out.append(chr(int(s[j+2:j+6], 16))); j += 6; continue
                    if e == 'x':
                        k = j + 2
                        while k < n and s[k] in '0123456789abcdefABCDEF': k += 1
                        out.append(chr(int(s[j+2:k], 16))); j = k; continue
                    raise ValueError('escape ' + e)
                out.append(s[j]); j += 1
            yield ('str', ''.join(out)); i = j + 1; continue
        if c == 'R' and s.startswith('R"', i):
            raise ValueError('raw string')
        m = re.match(r'[A-Za-z_][A-Za-z_0-9]*(::[A-Za-z_][A-Za-z_0-9]*)*', s[i:])
        if m:
            yield ('id', m.group()); i += len(m.group()); continue
        m = re.match(r'-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?', s[i:])
        if m:
            t = m.group(); yield ('num', float(t) if ('.' in t or 'e' in t or 'E' in t) else int(t)); i += len(t); continue
        yield ('op', c); i += 1

def parse_value(toks, k):
    t, v = toks[k]
    if t == 'str':
        s = v; k += 1
        while toks[k][0] == 'str':
            s += toks[k][1]; k += 1
        return ('val', s), k
    if t == 'num':
        return ('val', v), k + 1
    if t == 'id':
        if v in ('true', 'false'): return ('val', v == 'true'), k + 1
        if v == 'nullptr': return ('val', None), k + 1
        if v in ('json::object', 'json::array'):
            assert toks[k+1] == ('op', '(')
            if toks[k+2] == ('op', ')'):
                return ('val', {} if v == 'json::object' else []), k + 3
            inner, k2 = parse_value(toks, k + 2)
            assert toks[k2] == ('op', ')')
            if v == 'json::array':
                assert inner[0] == 'init'
                return ('val', [resolve(x) for x in inner[1]]), k2 + 1
            return ('val', resolve(inner)), k2 + 1
        raise ValueError('id ' + v)
    if (t, v) == ('op', '{'):
        items = []; k += 1
        while toks[k] != ('op', '}'):
            x, k = parse_value(toks, k)
            items.append(x)
            if toks[k] == ('op', ','): k += 1
        return ('init', items), k + 1
    raise ValueError('tok %r' % (toks[k],))

def resolve(node):
    kind, v = node
    if kind == 'val': return v
    # nlohmann: an init list of pairs with string keys is an object
    if v and all(x[0] == 'init' and len(x[1]) == 2 and x[1][0][0] == 'val' and isinstance(x[1][0][1], str) for x in v):
        return {x[1][0][1]: resolve(x[1][1]) for x in v}
    return [resolve(x) for x in v]

out = []
for m in re.finditer(r'test_template\(t,', src):
    try:
        toks = []
        gen = tokens(src, m.end())
        depth = 0
        for tk in gen:
            toks.append(tk)
            if tk == ('op', '(') or tk == ('op', '{'): depth += 1
            if tk == ('op', ')') or tk == ('op', '}'):
                if depth == 0: break
                depth -= 1
        name, k = parse_value(toks, 0); assert toks[k] == ('op', ','); k += 1
        tmpl, k = parse_value(toks, k); assert toks[k] == ('op', ','); k += 1
        vars_, k = parse_value(toks, k); assert toks[k] == ('op', ','), toks[k]
        v = resolve(vars_)
        if v == []: v = {}
        assert isinstance(v, dict)
        out.append({"name": "llamacpp/" + resolve(name), "template": resolve(tmpl), "vars": v})
    except Exception as e:
        print("skip at", src.count('\n', 0, m.start()) + 1, e, file=sys.stderr)
path = os.path.join(ROOT, "internal/runtime/jinja/testdata/snippets.json")
with open(path, encoding="utf-8") as f:
    snippets = [s for s in json.load(f) if not s["name"].startswith("llamacpp/")]
snippets += out
with open(path, "w", encoding="utf-8") as f:
    json.dump(snippets, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(f"imported {len(out)} llama.cpp test inputs")
