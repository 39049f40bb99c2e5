// The Tokenizer API on the real Qwen3 file: named tokens, special flags, input that is not
// UTF-8, speed, concurrent use, and loading errors that name the file and the JSON path.

#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

namespace evt::tokenizer {
namespace {

using nlohmann::json;

const std::string kQwen3 = std::string(EVT_SOURCE_DIR) + "/models/tokenizers/qwen3/tokenizer.json";
const std::string kLlama3Style = std::string(EVT_SOURCE_DIR) + "/models/tokenizers/llama3-style/tokenizer.json";

const Tokenizer& qwen3() {
  static const Tokenizer tokenizer = [] {
    auto loaded = Tokenizer::load(kQwen3);
    EVT_CHECK(loaded.ok()) << loaded.status().message();
    return std::move(*loaded);
  }();
  return tokenizer;
}

std::string joined_bytes(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::string bytes;
  for (int32_t id : ids) bytes += *tokenizer.token_bytes(id);
  return bytes;
}

TEST(Tokenizer, NamedTokensOfQwen3) {
  const Tokenizer& tok = qwen3();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.token_id("<|im_end|>"), 151645);
  EXPECT_TRUE(tok.is_special(151645));
  EXPECT_EQ(tok.token_id("<think>"), 151667);
  EXPECT_FALSE(tok.is_special(151667));  // Qwen3 keeps <think> when special tokens are skipped
  EXPECT_EQ(tok.token_id("Ġthe"), 279);
  EXPECT_EQ(tok.token_name(279), "Ġthe");
  EXPECT_EQ(tok.token_bytes(279), " the");
  EXPECT_EQ(tok.token_id("no such token"), std::nullopt);
  EXPECT_EQ(tok.token_name(151669), std::nullopt);
  EXPECT_EQ(tok.encode("Hello, world!"), (std::vector<int32_t>{9707, 11, 1879, 0}));
  const std::vector<int32_t> chat = tok.encode("<|im_start|>user\nHi<think></think><|im_end|>");
  EXPECT_EQ(*tok.decode(chat, /*skip_special=*/true), "user\nHi<think></think>");
}

TEST(Tokenizer, DecodeRejectsUnknownIds) {
  const std::vector<int32_t> ids = {9707, 151669};
  auto text = qwen3().decode(ids);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(), "token id 151669 is not in the vocabulary (ids 0..151668)");
  EXPECT_FALSE(qwen3().decode(std::vector<int32_t>{-1}).ok());
}

// The model fixtures' tokenizers (scripts/build_test_tokenizers.py): exactly the fixtures' 1024
// ids, the ids `tokenizers` 0.23.3 gives, text that round-trips, and the bos/eos tokens that the
// fixtures' tokenizer_config.json names.
TEST(Tokenizer, FixtureTokenizersMatchTheirModels) {
  const std::string text = "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + 12345\n# café 你好 🙂";
  struct Fixture {
    std::string name;
    std::vector<int32_t> ids;  // tokenizers 0.23.3, encode(text, add_special_tokens=True)
    int32_t eos;
  };
  // Qwen3 splits digits one by one, Llama 3 by three ("123" is 968); Llama adds <|begin_of_text|>.
  const std::vector<Fixture> fixtures = {
      {"qwen3-tiny",
       {445, 283, 72,  65,  265, 1017, 420, 7,   77, 307, 258, 323, 291, 300, 291, 534, 220, 17,  446,
        283, 72,  65,  265, 1017, 420, 7,   77,  428, 220, 16,  8,   409, 220, 16,  17,  18,  19,  20,
        198, 2,   284, 64,  69,  127, 102, 220, 160, 121, 254, 161, 98,  121, 220, 172, 253, 247, 224},
       1021},
      {"llama-tiny",
       {1019, 445, 283, 72,  65,  265, 64,  66,  420, 7,   77, 307, 258, 323, 291, 300, 291, 534, 220, 17,
        446,  283, 72,  65,  265, 64,  66,  420, 7,   77,  428, 220, 16,  8,   409, 220, 968, 18,  19,  20,
        198,  2,   284, 64,  69,  127, 102, 220, 160, 121, 254, 161, 98,  121, 220, 172, 253, 247, 224},
       1023},
  };
  for (const Fixture& f : fixtures) {
    const std::string folder = std::string(EVT_SOURCE_DIR) + "/tests/fixtures/" + f.name;
    auto loaded = Tokenizer::load(folder + "/tokenizer.json");
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    const Tokenizer& tok = *loaded;
    EXPECT_EQ(tok.vocab_size(), 1024) << f.name;
    const std::vector<int32_t> ids = tok.encode(text, /*add_special_tokens=*/true);
    EXPECT_EQ(ids, f.ids) << f.name;
    EXPECT_EQ(*tok.decode(ids, /*skip_special=*/true), text) << f.name;

    std::ifstream config_file(folder + "/tokenizer_config.json");
    const json config = json::parse(config_file);
    EXPECT_EQ(tok.token_id(config["eos_token"].get<std::string>()), f.eos) << f.name;
    if (!config["bos_token"].is_null()) {
      EXPECT_EQ(tok.token_id(config["bos_token"].get<std::string>()), f.ids[0]) << f.name;
    }
  }
}

// Ill-formed UTF-8 is encoded byte for byte; the text around it as usual.
TEST(Tokenizer, InvalidUtf8KeepsItsBytes) {
  const Tokenizer& tok = qwen3();
  for (std::string_view input : {"\xff", "abc\xff\xfe def", "\xe4\xb8", "caf\xc3", "\xed\xa0\x80 surrogate",
                                 "\xf4\x90\x80\x80", "<|im_end|>\x80<|im_end|>", "\xc0\xaf overlong"}) {
    const std::vector<int32_t> ids = tok.encode(input);
    EXPECT_EQ(joined_bytes(tok, ids), input);
  }
  EXPECT_EQ(tok.encode("abc\xff def"), [&] {
    std::vector<int32_t> ids = tok.encode("abc");
    ids.push_back(*tok.token_id("ÿ"));  // byte 0xFF stands for itself in the byte-level alphabet
    for (int32_t id : tok.encode(" def")) ids.push_back(id);
    return ids;
  }());
  EXPECT_EQ(*tok.decode(tok.encode("caf\xc3 ok")), "caf\xEF\xBF\xBD ok");
}

// Random bytes (fixed seed), mostly ill-formed: encoding never fails and loses no byte. (The
// Llama-3-style file has no normalizer, which would otherwise change well-formed stretches.)
TEST(Tokenizer, RandomBytesKeepTheirBytes) {
  auto loaded = Tokenizer::load(kLlama3Style);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Tokenizer& tok = *loaded;
  std::mt19937 rng(20260522);
  for (int i = 0; i < 2000; ++i) {
    std::string input(std::uniform_int_distribution<int>(1, 40)(rng), '\0');
    for (char& c : input) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    // Keep some well-formed stretches too, so that ill-formed bytes sit between real words.
    if (i % 2) input.insert(input.size() / 2, " the <|eot_id|> 中文 ");
    ASSERT_EQ(joined_bytes(tok, tok.encode(input)), input) << "random string " << i;
  }
}

// Encoding about 1 MB of mixed text must take well under a second (the word cache does most).
TEST(Tokenizer, EncodesAMegabyteQuickly) {
  const Tokenizer& tok = qwen3();
  std::ifstream file(std::string(EVT_SOURCE_DIR) + "/tests/tokenizer/data/qwen3_reference.json");
  const json reference = json::parse(file);
  std::string text;
  for (const json& c : reference["cases"]) text += c["text"].get<std::string>() + "\n";
  const std::string corpus = text;
  while (text.size() < (1u << 20)) text += corpus;
  tok.encode(corpus);  // warm-up, so the time below is not the first page faults of the tables
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok.encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "encoded " << text.size() << " bytes into " << ids.size() << " ids in " << seconds * 1e3 << " ms\n";
  EXPECT_LT(seconds, 1.0);
  EXPECT_GT(ids.size(), text.size() / 8);
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  const Tokenizer& tok = qwen3();
  const std::string text = "Concurrent 编码 test 🙂 with numbers 12345 and\n\n\nwhitespace   ";
  const std::vector<int32_t> expected = tok.encode(text);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches = 0;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        if (tok.encode(text + std::to_string(i * 4 + t)).size() < expected.size()) ++mismatches;
        if (tok.encode(text) != expected) ++mismatches;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

class LoadErrorTest : public ::testing::Test {
 protected:
  // Writes the Llama-3-style file with `edit` applied and returns the error loading it gives.
  std::string load_error(const std::function<void(json&)>& edit) {
    std::ifstream in(kLlama3Style);
    json doc = json::parse(in);
    edit(doc);
    const std::string path = ::testing::TempDir() + "edited_tokenizer.json";
    std::ofstream(path) << doc.dump();
    auto loaded = Tokenizer::load(path);
    EXPECT_FALSE(loaded.ok());
    const std::string message = loaded.ok() ? "" : loaded.status().message();
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    return message.substr(std::min(message.size(), path.size() + 2));
  }
};

TEST_F(LoadErrorTest, NamesTheJsonPath) {
  EXPECT_EQ(load_error([](json& d) { d["model"]["type"] = "Unigram"; }),
            "model.type \"Unigram\" is not supported (only byte-level BPE)");
  EXPECT_EQ(load_error([](json& d) { d["model"]["byte_fallback"] = true; }), "model.byte_fallback true is not supported");
  EXPECT_EQ(load_error([](json& d) { d["model"]["merges"][3] = "Ġ"; }),
            "model.merges[3] is neither \"left right\" nor [left, right]: \"Ġ\"");
  EXPECT_EQ(load_error([](json& d) { d["model"]["merges"][5] = {"Ġ", "nope"}; }),
            "model.merges[5]: \"nope\" is not in model.vocab");
  EXPECT_EQ(load_error([](json& d) {
              d["model"]["vocab"].erase("a");
              json kept = json::array();
              for (const json& merge : d["model"]["merges"]) {
                if (merge[0] != "a" && merge[1] != "a") kept.push_back(merge);
              }
              d["model"]["merges"] = kept;
            }),
            "model.vocab has no token for byte 0x61");
  EXPECT_EQ(load_error([](json& d) { d["normalizer"] = {{"type", "NFKC"}}; }),
            "normalizer.type \"NFKC\" is not supported (only NFC)");
  EXPECT_EQ(load_error([](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L}"; }),
            "pre_tokenizer.pretokenizers[0].pattern: pattern does not compile at offset 6: missing closing parenthesis");
  EXPECT_EQ(load_error([](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }),
            "pre_tokenizer.pretokenizers[0].behavior \"Removed\" is not supported (only \"Isolated\")");
  EXPECT_EQ(load_error([](json& d) { d["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true; }),
            "pre_tokenizer.pretokenizers[1].use_regex true is not supported");
  EXPECT_EQ(load_error([](json& d) { d["decoder"] = {{"type", "WordPiece"}}; }),
            "decoder.type \"WordPiece\" is not supported (only ByteLevel)");
  EXPECT_EQ(load_error([](json& d) { d["added_tokens"][0]["id"] = "x"; }), "added_tokens[0].id is not a valid token id: \"x\"");
  EXPECT_EQ(load_error([](json& d) { d["added_tokens"][0]["id"] = 2000000000; }),
            "token id 2000000000 is far beyond the 6011 tokens the file has");
  EXPECT_EQ(load_error([](json& d) { d["post_processor"]["processors"][1]["special_tokens"] = json::object(); }),
            "post_processor.processors[1].single[0] names no entry of post_processor.processors[1].special_tokens");
}

TEST(Tokenizer, LoadErrorsForFiles) {
  const std::string missing = ::testing::TempDir() + "no_such_tokenizer.json";
  EXPECT_EQ(Tokenizer::load(missing).status().message(), missing + ": cannot open");
  const std::string broken = ::testing::TempDir() + "broken_tokenizer.json";
  std::ofstream(broken) << "{\"model\": ";
  const std::string message = Tokenizer::load(broken).status().message();
  EXPECT_EQ(message.rfind(broken + ": not valid JSON: ", 0), 0u) << message;
}

}  // namespace
}  // namespace evt::tokenizer
