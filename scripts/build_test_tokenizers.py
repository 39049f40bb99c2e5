#!/usr/bin/env python3
"""Trains the small byte-level BPE tokenizers the tests use besides the real Qwen3 one:

- models/tokenizers/llama3-style/tokenizer.json: laid out like Meta Llama 3's file (its Split
  regex, which groups digits by three; ignore_merges; <|begin_of_text|> added by a
  TemplateProcessing post-processor; no normalizer), but with a small vocabulary trained here,
  since Meta's file is not under a permissive license.
- tests/tokenizer/data/added_flags/tokenizer.json: the same model with an NFC normalizer and added
  tokens that use lstrip, rstrip, single_word and normalized, which neither real file exercises.
- tests/fixtures/{qwen3-tiny,llama-tiny}/tokenizer.json: one per model fixture, with exactly the
  fixture's 1024 ids (the added tokens included), so that any id the model emits decodes. qwen3-tiny's
  is laid out as Qwen3's file (NFC, the Qwen2 Split regex, <|endoftext|> <|im_start|> <|im_end|>
  special, <think> </think> not), llama-tiny's as llama3-style with Llama 3's chat tokens.

The first two are trained on Python's standard library sources (code, English) plus the text of the
Qwen3 vocabulary (fragments of many scripts); the fixtures' on the standard library sources only,
which with 1024 ids buys code and English merges rather than single CJK characters. Python 3.11.7,
tokenizers 0.23.3; training is deterministic. Run once; the outputs are committed.
Usage: python scripts/build_test_tokenizers.py   (from the repository root; needs `tokenizers`)
"""
import json
import sysconfig
from pathlib import Path

from build_qwen3_tokenizer import QWEN2_PATTERN
from byte_level import byte_to_unicode
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                  "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
                  "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
VOCAB_SIZE = 6000
# The fixtures' config.json vocab_size, which the tokenizer must fill exactly.
FIXTURE_VOCAB_SIZE = 1024
# The chat tokens of each family, in the order the real files number them (after the BPE vocab).
FIXTURE_LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                          "<|eot_id|>"]
FIXTURE_QWEN3_ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]


def stdlib_sources() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return [p.read_text(errors="replace") for p in sorted(stdlib.glob("*.py"))[:120]]


def corpus() -> list[str]:
    texts = stdlib_sources()
    qwen = json.loads(Path("models/tokenizers/qwen3/tokenizer.json").read_text())
    to_byte = {c: b for b, c in byte_to_unicode().items()}
    words = [bytes(to_byte[c] for c in token).decode(errors="ignore") for token in qwen["model"]["vocab"]]
    texts += [" ".join(words[i:i + 200]) for i in range(0, len(words), 200)]
    return texts


def train_byte_level(tok: Tokenizer, pattern: str, texts: list[str], vocab_size: int, trim_offsets: bool) -> None:
    """Trains `tok`'s BPE to `vocab_size` ids behind the Split regex `pattern` of its family."""
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=trim_offsets, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)


def llama3_style(texts: list[str], bpe_vocab_size: int, special: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE(ignore_merges=True))
    train_byte_level(tok, LLAMA3_PATTERN, texts, bpe_vocab_size, trim_offsets=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in special])
    bos = special[0]
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos}:1 $B:1",
                                      special_tokens=[(bos, tok.token_to_id(bos))]),
    ])
    return tok


def qwen3_style(texts: list[str], bpe_vocab_size: int) -> Tokenizer:
    """Qwen3's layout (as scripts/build_qwen3_tokenizer.py writes it) with a vocabulary trained here."""
    tok = Tokenizer(models.BPE(ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    train_byte_level(tok, QWEN2_PATTERN, texts, bpe_vocab_size, trim_offsets=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    first_non_special = FIXTURE_QWEN3_ADDED.index("<think>")
    tok.add_tokens([AddedToken(t, normalized=False, special=i < first_non_special)
                    for i, t in enumerate(FIXTURE_QWEN3_ADDED)])
    return tok


def with_flagged_tokens(tok: Tokenizer) -> Tokenizer:
    tok.normalizer = normalizers.NFC()
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False, special=True)])
    tok.add_tokens([
        AddedToken("[sep]", rstrip=True, normalized=False, special=False),
        AddedToken("zwort", single_word=True, normalized=False, special=False),
        AddedToken("café", normalized=True, special=False),   # matches e + combining acute after NFC
        AddedToken("<both>", lstrip=True, rstrip=True, normalized=True, special=True),
    ])
    return tok


def save(tok: Tokenizer, folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"), pretty=False)
    print(f"wrote {out / 'tokenizer.json'}: vocab {tok.get_vocab_size(with_added_tokens=True)}")


def main() -> None:
    llama = llama3_style(corpus(), VOCAB_SIZE, LLAMA3_SPECIAL)
    save(llama, "models/tokenizers/llama3-style")
    save(with_flagged_tokens(Tokenizer.from_str(llama.to_str())), "tests/tokenizer/data/added_flags")

    code = stdlib_sources()
    fixtures = {
        "qwen3-tiny": qwen3_style(code, FIXTURE_VOCAB_SIZE - len(FIXTURE_QWEN3_ADDED)),
        "llama-tiny": llama3_style(code, FIXTURE_VOCAB_SIZE - len(FIXTURE_LLAMA3_SPECIAL), FIXTURE_LLAMA3_SPECIAL),
    }
    for name, tok in fixtures.items():
        assert tok.get_vocab_size(with_added_tokens=True) == FIXTURE_VOCAB_SIZE, name
        save(tok, f"tests/fixtures/{name}")


if __name__ == "__main__":
    main()
