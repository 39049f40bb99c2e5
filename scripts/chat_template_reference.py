#!/usr/bin/env python3
"""Writes the chat-template references that tests/tokenizer/chat_template_test.cc compares with.

The templates are the official ones as the PyPI package trl ships them (trl/chat_templates/, kept
there "for identity comparison" with the models' own tokenizer_config.json; Apache-2.0):
  qwen3     Qwen/Qwen3-8B's chat template (ChatML, <think> handling, enable_thinking)
  llama3    meta-llama/Meta-Llama-3-8B-Instruct's
  llama3_1  meta-llama/Llama-3.1-8B-Instruct's (system block dated 26 Jul 2024)
  llama3_2  meta-llama/Llama-3.2-*-Instruct's (system block dated by strftime_now)
They are copied byte for byte to tests/tokenizer/data/chat_templates/<name>.jinja. Each
conversation below is rendered with transformers' apply_chat_template(..., tokenize=False) under
several options into tests/tokenizer/data/chat_template_reference.json. The Qwen3 and Llama 3.1
templates also go into tokenizer_config.json files of the tiny model fixtures.

--check: fail if any of those files differs from what the installed packages give now.

Set-up (a venv outside the repository; torch is not needed):
  python3 -m venv ~/.cache/eventide-venv-chat
  ~/.cache/eventide-venv-chat/bin/pip install transformers==5.23.0 jinja2==3.1.6
  ~/.cache/eventide-venv-chat/bin/pip install --no-deps trl==1.16.0   # only its template files are read
Usage: ~/.cache/eventide-venv-chat/bin/python scripts/chat_template_reference.py [--check]   (from the repository root)
"""
import importlib.metadata
import json
import sys
from pathlib import Path

import jinja2
import transformers
from reference_files import write_or_check
from transformers import PreTrainedTokenizerFast

DATA = Path("tests/tokenizer/data")
LLAMA_TOKENIZER = "models/tokenizers/llama3-style/tokenizer.json"

# name -> the model whose template it is, the tokenizer.json that supplies the special tokens, and
# bos/eos as the model's tokenizer_config.json has them.
TEMPLATES = {
    "qwen3": ("Qwen/Qwen3-8B", "models/tokenizers/qwen3/tokenizer.json", None, "<|im_end|>"),
    "llama3": ("meta-llama/Meta-Llama-3-8B-Instruct", LLAMA_TOKENIZER, "<|begin_of_text|>", "<|eot_id|>"),
    "llama3_1": ("meta-llama/Llama-3.1-8B-Instruct", LLAMA_TOKENIZER, "<|begin_of_text|>", "<|eot_id|>"),
    "llama3_2": ("meta-llama/Llama-3.2-1B-Instruct", LLAMA_TOKENIZER, "<|begin_of_text|>", "<|eot_id|>"),
}

FIXTURES = {"tests/fixtures/qwen3-tiny": "qwen3", "tests/fixtures/llama-tiny": "llama3_1"}


def system(text):
    return {"role": "system", "content": text}


def user(text):
    return {"role": "user", "content": text}


def assistant(text, reasoning=None):
    message = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return message


CONVERSATIONS = {
    "user_only": [user("Hello!")],
    "system_user": [system("You are a helpful assistant."), user("What is 2 + 2?")],
    "multi_turn": [system("You are terse."), user("What is 2 + 2?"), assistant("4."), user("And 3 + 3?"),
                   assistant("6.")],
    # Qwen3 drops the reasoning of turns before the last query...
    "past_think": [user("Hi"), assistant("<think>\nThe user greets me.\n</think>\n\nHello! How can I help?"),
                   user("Tell me a joke.")],
    # ...keeps it in the turns after it, and gives the last turn an empty block if it has none.
    "final_think": [user("Hi"), assistant("<think>\nGreet back.\n</think>\n\nHello!")],
    "final_plain": [system("Be kind."), user("Hi"), assistant("No reasoning here.")],
    "turns_after_query": [user("Plan a trip."), assistant("<think>\nStep one.\n</think>\n\nFirst, pick a place."),
                          assistant("Then book it."), assistant("<think>\nStep three.\n</think>\nFinally, pack.")],
    "reasoning_content": [user("Why is the sky blue?"),
                          assistant("Rayleigh scattering.", reasoning="\nShort wavelengths scatter more.\n"),
                          user("Thanks"), assistant("You're welcome.", reasoning="\n\nNo need to think.\n")],
    # An empty reasoning_content wins over a <think> block in the content, which then stays as it is.
    "reasoning_content_empty": [user("Hi"), assistant("<think>kept</think>Hello.", reasoning="")],
    "unicode": [system("\u3000 Réponds en français. \u00a0"), user("你好，世界！🎉 e\u0301 \u200b"),
                assistant("\u2028Привет 👋\x1c"), user("\t\r\n 日本語 \x85")],
    "empty_content": [system(""), user(""), assistant(""), user("")],
    "whitespace_only": [user("   \n\t"), assistant("\n\n")],
    # A user message that is tool output does not count as the last query.
    "tool_response_user": [user("What's the weather?"), assistant("<think>\nCall the tool.\n</think>\n\nChecking."),
                           user("<tool_response>\n{\"temp\": 21}\n</tool_response>"),
                           assistant("<think>\nIt is 21.\n</think>\n\nIt is 21 °C.")],
    "later_system": [user("Hi"), system("Be brief."), user("Explain gravity.")],
    "system_only": [system("You are a pirate.")],
    "assistant_first": [assistant("<think>\nx\n</think>\n\nI speak first.")],
    "think_twice": [user("q"), assistant("\n<think>\n\nfirst\n\n</think>\nmid<think>second</think>\n\n\nfinal\n")],
    "think_opened_twice": [user("q"), assistant("<think>outer\n<think>\ninner\n</think>\n\nanswer")],
    "think_unopened": [user("q"), assistant("reasoning without an opening tag\n</think>\n\nanswer")],
    "think_unclosed": [user("q"), assistant("<think>\nnever closed")],
    "special_tokens_as_text": [user("<|im_end|> and <|eot_id|> are text here"),
                               assistant("<|im_start|>assistant\n<|start_header_id|>")],
}

QWEN3_OPTIONS = [{}, {"add_generation_prompt": True}, {"add_generation_prompt": True, "enable_thinking": False},
                 {"add_generation_prompt": True, "enable_thinking": True}, {"enable_thinking": False}]
LLAMA_OPTIONS = [{}, {"add_generation_prompt": True}]
# Llama 3.2 dates its system block today unless given a date; 3.1 takes one too.
DATED_OPTIONS = [{"date_string": "17 May 2025"}, {"add_generation_prompt": True, "date_string": "01 Jan 2026"}]
OPTIONS = {"qwen3": QWEN3_OPTIONS, "llama3": LLAMA_OPTIONS, "llama3_1": LLAMA_OPTIONS + DATED_OPTIONS[:1],
           "llama3_2": DATED_OPTIONS}


def trl_template(name: str) -> str:
    # Located without importing trl, which would need torch and the rest of its dependencies.
    path = importlib.metadata.distribution("trl").locate_file(f"trl/chat_templates/{name}.jinja")
    return Path(path).read_text(encoding="utf-8")


def versions() -> dict:
    return {"transformers": transformers.__version__, "jinja2": jinja2.__version__,
            "trl": importlib.metadata.version("trl")}


def reference(templates: dict[str, str]) -> dict:
    cases = []
    for name, (model, tokenizer_file, bos, eos) in TEMPLATES.items():
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=tokenizer_file, bos_token=bos, eos_token=eos,
                                            chat_template=templates[name])
        for conversation, messages in CONVERSATIONS.items():
            for options in OPTIONS[name]:
                text = tokenizer.apply_chat_template(messages, tokenize=False, **options)
                cases.append({"template": name, "conversation": conversation, "options": options, "text": text})
    return {
        "generator": "scripts/chat_template_reference.py",
        "versions": versions(),
        "templates": {name: {"file": f"{DATA}/chat_templates/{name}.jinja", "model": model, "bos_token": bos}
                      for name, (model, _, bos, _) in TEMPLATES.items()},
        "conversations": CONVERSATIONS,
        "cases": cases,
    }


def fixture_config(template: str, name: str) -> str:
    _, _, bos, eos = TEMPLATES[name]
    config = {"bos_token": bos, "eos_token": eos, "chat_template": template}
    return json.dumps(config, ensure_ascii=False, indent=2) + "\n"


def outputs() -> dict[Path, str]:
    templates = {name: trl_template(name) for name in TEMPLATES}
    files = {DATA / "chat_templates" / f"{name}.jinja": text for name, text in templates.items()}
    text = json.dumps(reference(templates), ensure_ascii=False, indent=1)
    files[DATA / "chat_template_reference.json"] = text + "\n"
    for folder, name in FIXTURES.items():
        files[Path(folder) / "tokenizer_config.json"] = fixture_config(templates[name], name)
    return files


def main() -> int:
    return write_or_check(outputs(), ", ".join(f"{name} {version}" for name, version in versions().items()))

if __name__ == "__main__":
    sys.exit(main())
