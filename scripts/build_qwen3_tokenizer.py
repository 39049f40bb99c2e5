#!/usr/bin/env python3
"""Builds models/tokenizers/qwen3/tokenizer.json from the Qwen2/Qwen3 vocabulary that the PyPI
package quicktok-v1 ships (quicktok/data/qwen3.vocab and qwen3.special; Apache-2.0, see NOTICE).

No PyPI package ships Qwen's tokenizer.json itself, only this rank table (tiktoken form). The
Hugging Face file is the same table in byte-level form plus one merge per multi-byte token;
each token's merge is recovered by running BPE on its bytes with only lower-ranked tokens, which
is how tiktoken tables and HF merges correspond. Everything else (normalizer, the Split regex,
added tokens and their flags) is written as Qwen3's own tokenizer.json has it.

Usage: pip download --no-deps quicktok-v1==0.4.0 -d /tmp/qt
       python scripts/build_qwen3_tokenizer.py /tmp/qt/quicktok_v1-0.4.0-*.whl models/tokenizers/qwen3
Needs the `tokenizers` package (pinned in .ci/run).
"""
import struct
import sys
import zipfile
from pathlib import Path

from byte_level import byte_to_unicode
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen3 marks the tool, FIM and think tokens as not special, so skip_special_tokens keeps them.
FIRST_NON_SPECIAL = "<tool_call>"


def read_vocab(data: bytes) -> dict[bytes, int]:
    (count,) = struct.unpack_from("<I", data, 0)
    offset, ranks = 4, {}
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, offset)
        token = data[offset + 2:offset + 2 + length]
        (rank,) = struct.unpack_from("<I", data, offset + 2 + length)
        offset += 2 + length + 4
        ranks[token] = rank
    return ranks


def read_special(data: bytes) -> list[tuple[int, str]]:
    (count,) = struct.unpack_from("<I", data, 0)
    offset, special = 4, []
    for _ in range(count):
        token_id, length = struct.unpack_from("<IH", data, offset)
        special.append((token_id, data[offset + 6:offset + 6 + length].decode()))
        offset += 6 + length
    return special


def split_by_lower_ranks(token: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    parts = [bytes([b]) for b in token]
    limit = ranks[token]
    while len(parts) > 1:
        best = min(((ranks.get(parts[i] + parts[i + 1], limit), i) for i in range(len(parts) - 1)))
        if best[0] >= limit:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts


def main() -> None:
    wheel, out_dir = Path(sys.argv[1]), Path(sys.argv[2])
    with zipfile.ZipFile(wheel) as z:
        ranks = read_vocab(z.read("quicktok/data/qwen3.vocab"))
        special = read_special(z.read("quicktok/data/qwen3.special"))
    to_unicode = byte_to_unicode()
    text = lambda token: "".join(to_unicode[b] for b in token)  # noqa: E731

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = []
    for token, _ in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) == 1:
            continue
        parts = split_by_lower_ranks(token, ranks)
        assert len(parts) == 2, f"token {token!r} is not one merge of lower-ranked tokens: {parts}"
        merges.append((text(parts[0]), text(parts[1])))

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    is_special = True
    for token_id, content in sorted(special):
        is_special = is_special and content != FIRST_NON_SPECIAL
        added = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=is_special)
        tok.add_tokens([added])
        assert tok.token_to_id(content) == token_id, content
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"), pretty=False)
    print(f"wrote {out_dir / 'tokenizer.json'}: {len(vocab)} tokens, {len(merges)} merges, {len(special)} added")


if __name__ == "__main__":
    main()
