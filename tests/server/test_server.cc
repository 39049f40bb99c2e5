#include "server/test_server.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <fstream>

#include <unistd.h>

#include "model/cpu_decoder.h"
#include "model/loaded_model.h"
#include "support/source_dir.h"
#include "util/check.h"

namespace evt::server::testing {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr int32_t kFixtureVocab = 1024;
// Ids below this keep Qwen3's byte-level tokens and first merges; the rest are added tokens.
constexpr int32_t kKeptVocab = 1000;

// Qwen3's tokenizer with only the ids below kKeptVocab and the merges among them; the chat
// tokens and fillers take the ids up to the fixture's vocab, so that every id the model can
// sample decodes.
json cut_qwen3_tokenizer() {
  std::ifstream in(fs::path(evt::testing::source_dir()) / "models" / "tokenizers" / "qwen3" / "tokenizer.json");
  json t = json::parse(in);
  json vocab = json::object();
  for (const auto& [token, id] : t["model"]["vocab"].items()) {
    if (id.get<int32_t>() < kKeptVocab) vocab[token] = id;
  }
  json merges = json::array();
  for (const json& m : t["model"]["merges"]) {
    const std::string a = m[0], b = m[1];
    if (vocab.contains(a) && vocab.contains(b) && vocab.contains(a + b)) merges.push_back(m);
  }
  t["model"]["vocab"] = vocab;
  t["model"]["merges"] = merges;
  json added = json::array();
  int32_t next = kKeptVocab;
  for (const json& a : t["added_tokens"]) {
    const std::string content = a["content"];
    if (content == "<|endoftext|>" || content == "<|im_start|>" || content == "<|im_end|>" || content == "<think>" ||
        content == "</think>") {
      json kept = a;
      kept["id"] = next++;
      added.push_back(kept);
    }
  }
  while (next < kFixtureVocab) {
    added.push_back({{"id", next}, {"content", "<|filler_" + std::to_string(next) + "|>"}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
    ++next;
  }
  t["added_tokens"] = added;
  return t;
}

}  // namespace

const fs::path& test_model_dir() {
  // Removed when the binary exits.
  struct TempDir {
    fs::path path;
    ~TempDir() { fs::remove_all(path); }
  };
  static const TempDir dir{[] {
    const fs::path fixture = fs::path(evt::testing::source_dir()) / "tests" / "fixtures" / "qwen3-tiny";
    const fs::path d = fs::path(::testing::TempDir()) / ("evt_server_model_" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    for (const char* name : {"config.json", "generation_config.json", "model.safetensors", "tokenizer_config.json"}) {
      fs::create_symlink(fixture / name, d / name);
    }
    std::ofstream(d / "tokenizer.json") << cut_qwen3_tokenizer().dump();
    return d;
  }()};
  return dir.path;
}

TestServer::TestServer(const engine::EngineOptions& eo, bool start_engine) {
  // A write to a client that hung up must fail, not kill the test binary.
  std::signal(SIGPIPE, SIG_IGN);
  const fs::path& dir = test_model_dir();
  auto model = model::load_model(dir);
  EVT_CHECK(model.ok()) << model.status().message();
  auto decoder = model::make_cpu_decoder(*model, {.exec = model::Exec::kMegakernel, .workers = 2, .kv = {16, 128}});
  EVT_CHECK(decoder.ok()) << decoder.status().message();
  auto engine = engine::Engine::create(std::move(*decoder), eo);
  EVT_CHECK(engine.ok()) << engine.status().message();
  engine_ = std::move(*engine);
  auto tok = tokenizer::Tokenizer::load(dir / "tokenizer.json");
  EVT_CHECK(tok.ok()) << tok.status().message();
  tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(*tok));
  auto chat = tokenizer::ChatTemplate::load(dir / "tokenizer_config.json");
  EVT_CHECK(chat.ok()) << chat.status().message();
  ServedModel served{.name = "qwen3-tiny",
                     .engine = engine_.get(),
                     .tokenizer = tokenizer_.get(),
                     .chat_template = std::move(*chat),
                     .eos_token_ids = {*tokenizer_->token_id("<|im_end|>")}};
  server_ = std::make_unique<Server>(std::move(served),
                                     ServerOptions{.port = 0, .http_threads = 64, .max_body_bytes = 64 << 10,
                                                   .log_requests = false});
  const Expected<int> port = server_->bind();
  EVT_CHECK(port.ok()) << port.status().message();
  port_ = *port;
  if (start_engine) engine_->start();
  thread_ = std::thread([this] { server_->listen(); });
}

TestServer::~TestServer() {
  server_->stop();
  thread_.join();
  // The handlers use the engine, so it goes last; what it still has queued is aborted, into
  // queues its callbacks keep alive.
  server_.reset();
  engine_.reset();
}

}  // namespace evt::server::testing
