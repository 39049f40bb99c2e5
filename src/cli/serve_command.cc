#include "cli/serve_command.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/command_exit.h"
#include "cli/decoder_flags.h"
#include "model/presets.h"
#include "server/server.h"

namespace evt::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Start-up is timed from here: static initialization, before main() runs.
const Clock::time_point kProcessStart = Clock::now();

namespace fs = std::filesystem;

struct ServeArgs {
  DecoderFlags decoder;
  std::string tokenizer_dir;
  server::ServerOptions http;
  std::string model_name;
  engine::EngineOptions engine;
};

// A folder of the source tree, found through $EVT_SOURCE_DIR or else in a parent of the
// binary's directory (build trees live inside the source tree); `marker` is a file it holds.
std::string source_tree_dir(const fs::path& relative, const std::string& marker, const std::string& why) {
  if (const char* source = std::getenv("EVT_SOURCE_DIR")) return (fs::path(source) / relative).string();
  std::error_code ec;
  for (fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path(); !ec && dir.has_relative_path();
       dir = dir.parent_path()) {
    if (fs::exists(dir / relative / marker)) return (dir / relative).string();
  }
  fail(kUsage, fmt::format("{}, and {} was found neither under $EVT_SOURCE_DIR nor above the binary", why,
                           relative.string()));
}

// --tokenizer, or the --model folder, or for --random-weights the tokenizer the repo ships for
// the preset's family (Qwen3's own; a small one in Llama 3's layout for Llama presets).
std::string tokenizer_dir(const ServeArgs& a) {
  if (!a.tokenizer_dir.empty()) return a.tokenizer_dir;
  if (!a.decoder.random_weights) return a.decoder.model_dir;
  const auto config = model::preset_config(a.decoder.preset);
  if (!config.ok()) fail(kUsage, config.status().message());
  const char* name = model::architecture_family(config->architecture) == "qwen3" ? "qwen3" : "llama3-style";
  return source_tree_dir(fs::path("models") / "tokenizers" / name, "tokenizer.json",
                         "--random-weights without --tokenizer");
}

// tokenizer_config.json's eos_token ("<|im_end|>" or {"content": ...}) as an id, which chat
// models end their turns with even where config.json names no EOS id.
std::vector<int32_t> config_eos_ids(const fs::path& config, const tokenizer::Tokenizer& tok) {
  std::ifstream in(config);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("eos_token")) return {};
  const nlohmann::json& eos = j["eos_token"];
  const nlohmann::json& name = eos.is_object() ? eos.value("content", nlohmann::json()) : eos;
  if (!name.is_string()) return {};
  const auto id = tok.token_id(name.get<std::string>());
  return id ? std::vector<int32_t>{*id} : std::vector<int32_t>{};
}

// Stops the server on SIGINT or SIGTERM. The signals are blocked in every thread (this one
// runs before the others start) and taken by a thread of their own with sigwait, so that the
// stop runs outside a signal handler.
void stop_on_signals(server::Server& s) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A write to a client that hung up must fail (and abort its request), not end the server.
  std::signal(SIGPIPE, SIG_IGN);
  std::thread([&s, set] {
    int sig = 0;
    sigwait(&set, &sig);
    fmt::print(stderr, "signal {}: stopping\n", sig);
    s.stop();
  }).detach();
}

void run_serve(ServeArgs& a) {
  if (a.decoder.model_dir.empty() && !a.decoder.random_weights) {
    a.decoder.model_dir = source_tree_dir(fs::path("tests") / "fixtures" / "qwen3-tiny", "config.json", "no --model given");
  }
  const fs::path dir = tokenizer_dir(a);
  auto tok = tokenizer::Tokenizer::load(dir / "tokenizer.json");
  if (!tok.ok()) fail(kUsage, tok.status().message());
  std::optional<tokenizer::ChatTemplate> chat;
  if (auto t = tokenizer::ChatTemplate::load(dir / "tokenizer_config.json"); t.ok()) {
    chat = std::move(*t);
  } else {
    fmt::print(stderr, "no chat template, /v1/chat/completions will answer 400: {}\n", t.status().message());
  }

  MadeDecoder made = make_decoder(a.decoder, /*cpu_kv_pages=*/1024, /*cuda_kv_pages=*/0);
  auto created = engine::Engine::create(std::move(made.decoder), a.engine);
  if (!created.ok()) fail(kUsage, created.status().message());
  engine::Engine& eng = **created;
  if (eng.decoder().config().vocab_size < tok->vocab_size()) {
    fail(kUsage, fmt::format("{}: the tokenizer has {} ids, more than the model's vocab of {}", dir.string(),
                             tok->vocab_size(), eng.decoder().config().vocab_size));
  }

  const std::string default_name =
      a.decoder.random_weights ? "random-" + a.decoder.preset : fs::path(a.decoder.model_dir).filename().string();
  server::ServedModel served{.name = a.model_name.empty() ? default_name : a.model_name,
                             .engine = &eng,
                             .tokenizer = &*tok,
                             .chat_template = std::move(chat),
                             .eos_token_ids = config_eos_ids(dir / "tokenizer_config.json", *tok)};
  server::Server srv(served, a.http);
  stop_on_signals(srv);
  const Expected<int> port = srv.bind();
  if (!port.ok()) fail(kFailed, port.status().message());
  eng.start();
  const double startup_ms = std::chrono::duration<double, std::milli>(Clock::now() - kProcessStart).count();
  fmt::print("backend: {}\n", eng.decoder().describe());
  fmt::print("ready: serving {} at http://{}:{} (start-up {:.0f} ms, {:.0f} ms of it reading weights)\n", served.name,
             a.http.host, *port, startup_ms, made.weight_io_ms);
  std::fflush(stdout);
  srv.listen();
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "An OpenAI-compatible HTTP server: POST /v1/completions and /v1/chat/completions (streaming with "
      "\"stream\": true), GET /v1/models, /health and /metrics (Prometheus). Without --model it serves "
      "tests/fixtures/qwen3-tiny of the source tree ($EVT_SOURCE_DIR, or a parent of the binary's directory); "
      "the model directory (or --tokenizer) needs tokenizer.json, and tokenizer_config.json for the chat "
      "template. Prints a line starting \"ready: \" with the URL once it accepts requests");
  add_decoder_flags(*cmd, o->decoder, "CPU: 1024; CUDA: --kv-fraction of the free GPU memory");
  cmd->add_option("--tokenizer", o->tokenizer_dir,
                  "folder with tokenizer.json (and tokenizer_config.json for the chat template and EOS); default: "
                  "the --model folder, or with --random-weights the repo's models/tokenizers/qwen3 (Qwen3 presets) "
                  "or models/tokenizers/llama3-style (Llama presets)");
  cmd->add_option("--host", o->http.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->http.port, "port to listen on; 0: any free port")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", o->model_name,
                  "the model id clients use; default: the model directory's name, or random-PRESET");
  cmd->add_option("--http-threads", o->http.http_threads, "connections served at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-body-bytes", o->http.max_body_bytes, "larger request bodies get 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_scheduler_flags(*cmd, o->engine.scheduler);
  cmd->add_option("--max-waiting", o->engine.max_waiting, "queued requests beyond this get 429")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace evt::cli
