#!/usr/bin/env python3
"""Trains the two small byte-level BPE tokenizers the tests use besides the real Qwen3 one:

- models/tokenizers/llama3-style/tokenizer.json: laid out like Meta Llama 3's file (its Split
  regex, which groups digits by three; ignore_merges; <|begin_of_text|> added by a
  TemplateProcessing post-processor; no normalizer), but with a small vocabulary trained here,
  since Meta's file is not under a permissive license.
- tests/tokenizer/data/added_flags/tokenizer.json: the same model with an NFC normalizer and added
  tokens that use lstrip, rstrip, single_word and normalized, which neither real file exercises.

The training corpus is Python's standard library sources (code, English) plus the text of the
Qwen3 vocabulary (fragments of many scripts). Run once; the outputs are committed.
Usage: python scripts/build_test_tokenizers.py   (from the repository root; needs `tokenizers`)
"""
import json
import sysconfig
from pathlib import Path

from byte_level import byte_to_unicode
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                  "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|step_id|>",
                  "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
VOCAB_SIZE = 6000


def corpus() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [p.read_text(errors="replace") for p in sorted(stdlib.glob("*.py"))[:120]]
    qwen = json.loads(Path("models/tokenizers/qwen3/tokenizer.json").read_text())
    to_byte = {c: b for b, c in byte_to_unicode().items()}
    words = [bytes(to_byte[c] for c in token).decode(errors="ignore") for token in qwen["model"]["vocab"]]
    texts += [" ".join(words[i:i + 200]) for i in range(0, len(words), 200)]
    return texts


def llama3_style() -> Tokenizer:
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in LLAMA3_SPECIAL])
    bos = LLAMA3_SPECIAL[0]
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos}:1 $B:1",
                                      special_tokens=[(bos, tok.token_to_id(bos))]),
    ])
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


def main() -> None:
    llama = llama3_style()
    out = Path("models/tokenizers/llama3-style")
    out.mkdir(parents=True, exist_ok=True)
    llama.save(str(out / "tokenizer.json"), pretty=False)
    flags = Path("tests/tokenizer/data/added_flags")
    flags.mkdir(parents=True, exist_ok=True)
    with_flagged_tokens(Tokenizer.from_str(llama.to_str())).save(str(flags / "tokenizer.json"), pretty=False)
    print(f"wrote {out} and {flags}: vocab {llama.get_vocab_size(True)}")


if __name__ == "__main__":
    main()
