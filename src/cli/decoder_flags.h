#pragma once
// The flags that choose a model and a backend, shared by the commands that run a model
// (generate, bench engine), and the decoder they describe.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "engine/scheduler.h"
#include "model/decoder.h"

namespace evt::cli {

struct DecoderFlags {
  std::string model_dir;
  std::string preset;
  bool random_weights = false;
  uint64_t seed = 0;
  std::string exec = "megakernel";
  std::string device;  // empty: cuda when a GPU is present, else cpu
  int workers = 4;
  int blocks = 0;
  int64_t page_size = 16;
  int64_t kv_pages = 0;  // 0: the command's default
  double kv_fraction = 0.8;
  std::string tuning;  // a tuning table (eventide tune), or empty
};

void add_decoder_flags(CLI::App& cmd, DecoderFlags& f, const std::string& kv_pages_default);

// The engine's scheduler flags (--max-batched-tokens, --chunk-size, --max-sequences), shared by the
// commands that run an engine (bench engine, serve).
void add_scheduler_flags(CLI::App& cmd, engine::SchedulerOptions& s);

// What make_decoder() built, and how long the weights took to read from disk (0 for random
// weights, which the GPU generates).
struct MadeDecoder {
  std::unique_ptr<model::Decoder> decoder;
  double weight_io_ms = 0;
};

// Fails the command (command_exit.h) on any error, naming the flag or file at fault. Without
// --kv-pages the cache has the command's default pages for the backend; 0 pages on CUDA: the
// --kv-fraction of the GPU memory free after the weights.
MadeDecoder make_decoder(const DecoderFlags& f, int64_t cpu_kv_pages, int64_t cuda_kv_pages);

}  // namespace evt::cli
