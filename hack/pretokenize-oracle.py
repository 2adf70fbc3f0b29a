#!/usr/bin/env python3
"""Splits text as llama.cpp v0.5.0's pre-tokenizers do, with Python's `regex`
module standing in for std::regex: the reference the table cases of
internal/runtime/model/pretokenize_test.go were checked against.

Each pre-tokenizer is llama.cpp's list of regexes (src/llama-vocab.cpp,
llm_tokenizer_bpe), applied in turn to every piece the one before left, the
text between matches staying a piece of its own (src/unicode.cpp,
unicode_regex_split). Kimi K2's, which llama.cpp hand-codes
(unicode_regex_split_custom_kimi_k2) and which differs from its original
regex (no case split, no marks), is that code transcribed.

Usage: hack/pretokenize-oracle.py PRE TEXT...   prints the pieces of each
TEXT, a JSON string ('"a\\nb"'), as a JSON list, one line per text; or
hack/pretokenize-oracle.py --json < [[PRE, TEXT], ...]   prints
[[PIECE, ...], ...].
Needs `pip install regex`.
"""
import json
import sys
import unicodedata

import regex

CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
UPPER = r"((?=[\p{L}])([^a-z]))"
LOWER = r"((?=[\p{L}])([^A-Z]))"

PRE = {
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "gpt-2": [GPT2],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
    "starcoder": [r"\p{N}", GPT2],
    "glm4": [LLAMA3],
    "deepseek-llm": [
        r"[\r\n]",
        r"\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+",
        r"\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
        r"\s+$",
        r"[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
        r"\p{N}+",
    ],
    "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", r"\p{N}"],
    "deepseek-v3": [
        r"\p{N}{1,3}",
        r"[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
        r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ],
    "gpt-4o": [
        r"[^\r\n\p{L}\p{N}]?" + UPPER + "*" + LOWER + "+" + CONTRACTIONS + "?"
        + r"|[^\r\n\p{L}\p{N}]?" + UPPER + "+" + LOWER + "*" + CONTRACTIONS + "?"
        + r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ],
    "tekken": [
        r"[^\r\n\p{L}\p{N}]?" + UPPER + "*" + LOWER + "+"
        + r"|[^\r\n\p{L}\p{N}]?" + UPPER + "+" + LOWER + "*"
        + r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    ],
}
PRE["minimax-m2"] = PRE["gpt-4o"]
PRE["qwen2"] = [CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"]
PRE["bailingmoe"] = [
    r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"
]
PRE["seed-coder"] = [CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+"]


def isolate(pattern, piece):
    # llama.cpp matches with every whitespace character past ASCII made a
    # vertical tab, so none of them is in a class that lists it.
    seen = "".join("\v" if ord(c) > 0x7F and c.isspace() else c for c in piece)
    out, gap = [], 0
    for m in regex.finditer(pattern, seen, flags=regex.V1):
        if m.start() > gap:
            out.append(piece[gap:m.start()])
        if m.end() > m.start():
            out.append(piece[m.start():m.end()])
        gap = m.end()
    if gap < len(piece):
        out.append(piece[gap:])
    return out


WHITESPACE = set(map(chr, [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                           0x2028, 0x2029, 0x202F, 0x205F, 0x3000]))


def kimi_k2(text):
    """unicode_regex_split_custom_kimi_k2, line by line."""
    n = len(text)
    cat = lambda i: unicodedata.category(text[i]) if 0 <= i < n else ""
    letter = lambda i: cat(i).startswith("L")
    number = lambda i: cat(i).startswith("N")
    space = lambda i: 0 <= i < n and text[i] in WHITESPACE
    cpt = lambda i: text[i] if 0 <= i < n else ""
    def han(i):
        if not 0 <= i < n:
            return False
        c = ord(text[i])
        return any(lo <= c <= hi for lo, hi in [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
                   (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0x2CEB0, 0x2EBEF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)])
    out, prev, pos = [], 0, 0
    def add(end):
        nonlocal prev
        if end > prev:
            out.append(text[prev:end])
        prev = end
    while pos < n:
        c = cpt(pos)
        if han(pos):
            while han(pos):
                pos += 1
            add(pos)
            continue
        nl_or_ln = c in "\r\n" or letter(pos) or number(pos)
        if (letter(pos) and not han(pos)) or (not nl_or_ln and letter(pos + 1) and not han(pos + 1)):
            lead = False
            if not nl_or_ln:
                lead = True
                pos += 1
            has = False
            while letter(pos) and not han(pos):
                has = True
                pos += 1
            if has or (not lead and letter(pos) and not han(pos)):
                if not has:
                    pos += 1
                while letter(pos) and not han(pos):
                    pos += 1
                if cpt(pos) == "'" and pos + 1 < n:
                    a = cpt(pos + 1).lower()
                    if a in "stmd":
                        pos += 2
                    elif pos + 2 < n and a + cpt(pos + 2).lower() in ("re", "ve", "ll"):
                        pos += 3
                add(pos)
                continue
            elif lead:
                pos -= 1
        if number(pos):
            ini = pos
            while number(pos):
                pos += 1
                if pos - ini >= 3:
                    add(pos)
                    ini = pos
            add(pos)
            continue
        q = pos + 1 if c == " " else pos
        if 0 <= q < n and not (space(q) or letter(q) or number(q)):
            pos = q
            while 0 <= pos < n and not (space(pos) or letter(pos) or number(pos)):
                pos += 1
            while cpt(pos) in ("\r", "\n"):
                pos += 1
            add(pos)
            continue
        ws, last = 0, 0
        while space(pos + ws):
            if cpt(pos + ws) in ("\r", "\n"):
                last = pos + ws + 1
            ws += 1
        if last > 0:
            pos = last
            add(pos)
            continue
        if ws > 1 and pos + ws < n:
            pos += ws - 1
            add(pos)
            continue
        if ws > 0:
            pos += ws
            add(pos)
            continue
        pos += 1
        add(pos)
    return out


def split(pre, text):
    if pre == "kimi-k2":
        return kimi_k2(text)
    pieces = [text]
    for pattern in PRE[pre]:
        pieces = [p for piece in pieces for p in isolate(pattern, piece)]
    return pieces


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "--json":
        # stdin: [[pre, text], ...]; stdout: [[pieces], ...]
        print(json.dumps([split(p, t) for p, t in json.load(sys.stdin)], ensure_ascii=False))
    else:
        for text in sys.argv[2:]:
            print(json.dumps(split(sys.argv[1], json.loads(text)), ensure_ascii=False))
