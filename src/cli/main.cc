// eventide: one binary, with subcommands.

#include <CLI/CLI.hpp>

#include "cli/bench_decode.h"
#include "cli/bench_engine.h"
#include "cli/bench_moe.h"
#include "cli/bench_sched.h"
#include "cli/bench_serve.h"
#include "cli/devices_command.h"
#include "cli/generate_command.h"
#include "cli/graph_command.h"
#include "cli/make_model_command.h"
#include "cli/serve_command.h"
#include "cli/tune_command.h"

int main(int argc, char** argv) {
  CLI::App app{"Eventide: an LLM inference engine whose forward step runs as one persistent megakernel,\n"
               "compiled ahead of time from an Event Tensor task graph."};
  app.require_subcommand(1);
  evt::cli::add_graph_command(app);
  evt::cli::add_devices_command(app);
  evt::cli::add_make_model_command(app);
  evt::cli::add_generate_command(app);
  evt::cli::add_serve_command(app);
  evt::cli::add_tune_command(app);
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks, printed as a table and optionally written as JSON");
  bench->require_subcommand(1);
  evt::cli::add_bench_sched_command(*bench);
  evt::cli::add_bench_decode_command(*bench);
  evt::cli::add_bench_moe_command(*bench);
  evt::cli::add_bench_engine_command(*bench);
  evt::cli::add_bench_serve_command(*bench);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Error& e) {
    // Prints help or the message. Commands end with RuntimeError carrying their exit code;
    // anything else is a bad command line: exit code 2.
    const int code = app.exit(e);
    return (code == 0 || dynamic_cast<const CLI::RuntimeError*>(&e)) ? code : 2;
  }
  return 0;
}
