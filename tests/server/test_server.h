#pragma once
// The server on the qwen3-tiny fixture, on the CPU backend, listening on a free loopback port.
// The fixture has no tokenizer; test_model_dir() links its files into a temporary directory
// beside a tokenizer.json cut from models/tokenizers/qwen3 down to the fixture's 1024 ids.

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace evt::server::testing {

// Made once per process.
const std::filesystem::path& test_model_dir();

class TestServer {
 public:
  // start_engine false: requests queue up and never run (for the busy test).
  explicit TestServer(const engine::EngineOptions& eo = {}, bool start_engine = true);
  ~TestServer();

  int port() const { return port_; }
  engine::Engine& engine() { return *engine_; }

 private:
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace evt::server::testing
