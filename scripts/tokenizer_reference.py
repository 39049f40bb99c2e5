#!/usr/bin/env python3
"""Writes, or with --check verifies, the reference encodings the C++ tokenizer tests compare with.

For each tokenizer.json below, the Hugging Face `tokenizers` package (the version .ci/run pins)
encodes a fixed corpus and thousands of fuzzed strings (fixed seeds; 10,000 for Qwen3's) and decodes random id
sequences; the results go to tests/tokenizer/data/<name>_reference.json. The C++ test reads those
files, so it needs no Python; CI runs --check, which fails when the package disagrees with them.

Fuzzed strings draw from code points assigned before Unicode 9, so that the Unicode versions of
PCRE2, ICU and the Rust crates behind `tokenizers` all agree on their properties.
Usage: python scripts/tokenizer_reference.py [--check]   (from the repository root)
"""
import json
import random
import sys
from pathlib import Path

import tokenizers
from reference_files import write_or_check
from tokenizers import Tokenizer

TOKENIZERS = {  # name -> (file, fuzzed strings, random id sequences)
    "qwen3": ("models/tokenizers/qwen3/tokenizer.json", 10000, 200),  # the issue asks >= 10,000 for a real tokenizer
    "llama3_style": ("models/tokenizers/llama3-style/tokenizer.json", 2000, 200),
    "added_flags": ("tests/tokenizer/data/added_flags/tokenizer.json", 500, 100),
}

CORPUS = [
    "", " ", "  ", "\n", "\n\n\n", "\t", "a", "Hello, world!", "Hello world  ", "trailing spaces   ",
    "  leading spaces", "tabs\tin\t\tbetween\t", "line one\nline two\r\nline three\n\n\nafter three",
    "mixed \t \n \r\n whitespace \u00a0 nbsp \u3000 ideographic\u2003em space\u0085nel",
    "I'm sure you'll see it's what they've said, I'd say. WE'LL SEE. I'M", "don't 'quote' \"double\"",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // dot",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
    "3.14159 2,718 1e-10 0x1F 1234567890 12 345 6789 -42 +7 100% $19.99 €5 ¥1000",
    "2024-05-17T12:34:56Z v1.2.3 192.168.0.1 IPv6 ::1",
    "你好，世界！这是一个测试。中文分词和标点符号：“引号”、《书名》",
    "日本語のテキスト、ひらがなとカタカナ。東京タワー",
    "한국어 텍스트 테스트입니다. 안녕하세요!",
    "مرحبا بالعالم! هذا نص عربي ١٢٣٤٥ مع أرقام",
    "שלום עולם, זה טקסט בעברית",
    "Привет, мир! Это тест на русском языке. ЁЖИК",
    "Γειά σου Κόσμε! αβγδεζηθ ΑΒΓΔ",
    "हिन्दी में पाठ। नमस्ते दुनिया", "ภาษาไทยไม่มีช่องว่างระหว่างคำ", "Tiếng Việt có dấu: Xin chào thế giới",
    "emoji 🎉👍🏽👨‍👩‍👧‍👦 🇩🇪🇯🇵 ❤️‍🔥 ✅ 🤖", "😀😃😄😁😆😅😂🤣",
    "combining: e\u0301 a\u0308 o\u0302\u0323 n\u0303 \u1e9b\u0323 Å vs A\u030a, ﬁ ligature, ①, ｆｕｌｌ",
    "decomposed café vs café, Amélie, naïve, Zoë", "\u0041\u030a\u0301\u0327\u0328 stacked marks",
    "zero\u200bwidth\u200cjoiners\u200d and \ufeffBOM",
    "!!!??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) ]]] [[[ {{{ }}} ||| \\\\ ///",
    "a" * 300, " " * 100 + "x", "😀" * 50, "ab" * 200 + "\n" * 50,
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nreasoning\n</think>\n\nanswer<|endoftext|>", "<tool_call>{\"name\": \"f\"}</tool_call>",
    "<|im_start|><|im_end|><|im_start|>", "not special: <|im_start |> <|im_end <|", "<|endoftext|>text<|endoftext|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>", "<|eot_id|> <|eot_id|>  x",
    "<mask> a  <mask>b   <mask>", "[sep]  next [sep]\n\nline [sep]", "zwort zwortz azwort zwort.",
    "zwort_zwort 1zwort zwort", "café cafe\u0301 CAFÉ", "x  <both>  y<both>z", "  <mask>  [sep]  <both>  ",
]

# Pieces that stress the pre-tokenizer regex and added-token matching when glued together.
PIECES = [" ", "  ", "\t", "\n", "\r\n", "\n\n\n", "\u00a0", "\u3000", "\u2028", "\u0085", "'s", "'LL", "'t", "'",
          "1", "12", "1234", "٣", "Ⅻ", "²", "a", "Ab", "word", "ſ", "K", "é", "e\u0301", "\u0301", "\u0308", "ß",
          "中文", "ｱ", "가", "ك", "ש", "🙂", "👍🏽", "👨‍👩‍👧", "\u200d", "\ufe0f", ".", "...", "!?", "(", "{}", "<",
          "|", ">", "<|im_start|>", "<|im_end|>", "<think>", "<|endoftext|>", "<|eot_id|>", "<|begin_of_text|>",
          "<mask>", "[sep]", "zwort", "café", "<both>", "<|", "|>", "_"]

# Blocks assigned in full before Unicode 9 (plus unassigned gaps that stay unassigned).
RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
          (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2100, 0x22FF),
          (0x2500, 0x25FF), (0x3000, 0x30FF), (0x4E00, 0x9FCC), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF),
          (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x9, 0xD)]


def fuzz_strings(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(1, 24)
        if rng.random() < 0.5:
            out.append("".join(chr(rng.randint(*rng.choice(RANGES))) for _ in range(n)))
        else:
            out.append("".join(rng.choice(PIECES) if rng.random() < 0.7 else chr(rng.randint(*rng.choice(RANGES)))
                               for _ in range(n)))
    return out


def reference(path: str, fuzz_count: int, id_count: int, seed: int) -> dict:
    tok = Tokenizer.from_file(path)
    cases = []
    for text in CORPUS + fuzz_strings(fuzz_count, seed):
        case = {"text": text, "ids": tok.encode(text, add_special_tokens=False).ids}
        with_special = tok.encode(text, add_special_tokens=True).ids
        if with_special != case["ids"]:
            case["ids_with_special"] = with_special
        decoded = tok.decode(case["ids"], skip_special_tokens=False)
        if decoded != text:
            case["decoded"] = decoded
        skipped = tok.decode(case["ids"], skip_special_tokens=True)
        if skipped != decoded:
            case["decoded_skip_special"] = skipped
        cases.append(case)
    # Random ids split multi-byte characters, so these exercise the lossy (U+FFFD) decoding.
    rng = random.Random(seed + 1)
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    decodes = []
    for _ in range(id_count):
        ids = [rng.randrange(vocab_size) for _ in range(rng.randint(1, 12))]
        decodes.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                        "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    return {"tokenizer": path, "tokenizers_version": tokenizers.__version__, "vocab_size": vocab_size,
            "cases": cases, "decodes": decodes}


def main() -> int:
    files = {}
    for seed, (name, (path, fuzz_count, id_count)) in enumerate(TOKENIZERS.items()):
        text = json.dumps(reference(path, fuzz_count, id_count, seed), ensure_ascii=False, separators=(",", ":"))
        text = text.replace(',{"text"', ',\n{"text"').replace(',{"ids"', ',\n{"ids"') + "\n"
        files[Path(f"tests/tokenizer/data/{name}_reference.json")] = text
    return write_or_check(files, f"tokenizers {tokenizers.__version__}")


if __name__ == "__main__":
    sys.exit(main())
