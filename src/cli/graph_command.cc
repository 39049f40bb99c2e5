#include "cli/graph_command.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <optional>

#include "compiler/pipeline.h"
#include "ir/text_form.h"
#include "ir/tile_graph.h"
#include "kernels/registry.h"
#include "runtime/cpu/executor.h"

namespace evt::cli {

namespace {

// Exit codes: 0 success, 1 the graph or the run failed, 2 bad command line.
constexpr int kFailed = 1;
constexpr int kUsage = 2;

[[noreturn]] void exit_with(int code) { throw CLI::RuntimeError(code); }

void report(const Status& s) { fmt::print(stderr, "error: {}\n", s.message()); }

// "B=37" or "B=37,T=4" -> a binding.
Expected<ir::Binding> parse_binding(const std::string& text) {
  ir::Binding b;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return error("--bind '{}': expected NAME=VALUE, e.g. B=37", text);
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size() || v < 0) {
      return error("--bind '{}': the value of {} must be a non-negative integer", text, name);
    }
    b[name] = v;
    start = end + 1;
  }
  return b;
}

Expected<std::vector<ir::Binding>> parse_bindings(const std::vector<std::string>& texts) {
  std::vector<ir::Binding> out;
  for (const auto& t : texts) {
    EVT_ASSIGN_OR_RETURN(auto b, parse_binding(t));
    out.push_back(std::move(b));
  }
  return out;
}

struct CommonOptions {
  std::string file;
  std::vector<std::string> binds;
};

ir::Graph load_or_exit(const std::string& file) {
  auto g = ir::load_graph_file(file);
  if (!g.ok()) {  // the message starts with "FILE:LINE:COL: error:"
    fmt::print(stderr, "{}\n", g.status().message());
    exit_with(kFailed);
  }
  return std::move(g).value();
}

// --- graph verify

struct VerifyOptions : CommonOptions {
  bool static_only = false;
  bool verbose = false;
};

void run_verify(const VerifyOptions& o) {
  ir::Graph g = load_or_exit(o.file);
  auto bindings = parse_bindings(o.binds);
  if (!bindings.ok()) {
    report(bindings.status());
    exit_with(kUsage);
  }
  compiler::PassContext ctx{*bindings, &kernels::Registry::builtins(), !o.static_only, {}};
  Status s = compiler::run_pipeline(g, ctx);
  if (!s.ok()) {
    fmt::print(stderr, "{}: {}\n", o.file, s.message());
    exit_with(kFailed);
  }
  fmt::print("ok\n");
  if (o.verbose) {
    for (const auto& n : ctx.notes) fmt::print("  {}\n", n);
  }
}

// --- graph print

struct PrintOptions {
  std::string file;
  std::string print_after;
};

void run_print(const PrintOptions& o) {
  ir::Graph g = load_or_exit(o.file);
  if (o.print_after.empty()) {
    fmt::print("{}", ir::print_graph(g));
    return;
  }
  compiler::PassContext ctx{{}, &kernels::Registry::builtins(), true, {}};
  compiler::PipelineOptions po{o.print_after, false, [](const std::string& text) { fmt::print("{}", text); }};
  Status s = compiler::run_pipeline(g, ctx, po);
  if (!s.ok()) {
    fmt::print(stderr, "{}: {}\n", o.file, s.message());
    exit_with(kFailed);
  }
}

// --- graph run

struct RunOptions : CommonOptions {
  std::string schedule = "static";
  int workers = 4;
  std::optional<uint64_t> chaos;
  bool early_push = false;
  uint64_t seed = 1;
  int watchdog_ms = 2000;
  bool no_verify = false;
};

void run_run(const RunOptions& o) {
  ir::Graph g = load_or_exit(o.file);
  if (o.binds.size() > 1) {
    fmt::print(stderr, "error: graph run takes one --bind (e.g. --bind B=37,T=4), got {}\n", o.binds.size());
    exit_with(kUsage);
  }
  ir::Binding binding;
  if (!o.binds.empty()) {
    auto b = parse_binding(o.binds[0]);
    if (!b.ok()) {
      report(b.status());
      exit_with(kUsage);
    }
    binding = *b;
  }
  runtime::cpu::ExecOptions exec;
  exec.schedule = o.schedule == "dynamic" ? runtime::cpu::Schedule::kDynamic : runtime::cpu::Schedule::kStatic;
  exec.workers = o.workers;
  exec.chaos_seed = o.chaos;
  exec.early_push = o.early_push;
  exec.watchdog = std::chrono::milliseconds(o.watchdog_ms);

  const kernels::Registry& registry = kernels::Registry::builtins();
  compiler::PassContext ctx{{binding}, &registry, exec.schedule == runtime::cpu::Schedule::kDynamic, {}};
  Status s = compiler::run_pipeline(g, ctx, {.print_after = "", .skip_verify = o.no_verify, .print = nullptr});
  if (!s.ok()) {
    fmt::print(stderr, "{}: {}\n", o.file, s.message());
    exit_with(kFailed);
  }
  auto tg = ir::instantiate(g, binding);
  if (!tg.ok()) {
    fmt::print(stderr, "{}: {}\n", o.file, tg.status().message());
    exit_with(kFailed);
  }

  auto fresh_store = [&] {
    auto store = std::make_unique<runtime::cpu::BufferStore>(*tg);
    store->fill_inputs(o.seed);
    store->poison_outputs();
    return store;
  };
  // The parallel run goes first, so that a graph run with --no-verify meets the run-time checks
  // and the watchdog rather than the serial run's fail-fast.
  auto store = fresh_store();
  auto stats = runtime::cpu::execute(*tg, registry, *store, exec);
  if (!stats.ok()) {
    fmt::print(stderr, "{}: {} run failed: {}\n", o.file, o.schedule, stats.status().message());
    exit_with(kFailed);
  }
  auto serial_store = fresh_store();
  auto serial = runtime::cpu::execute_serial(*tg, registry, *serial_store);
  if (!serial.ok()) {
    fmt::print(stderr, "{}: serial run failed: {}\n", o.file, serial.status().message());
    exit_with(kFailed);
  }
  s = store->compare_outputs(*serial_store);
  if (!s.ok()) {
    fmt::print(stderr, "{}: {} run differs from the serial run: {}\n", o.file, o.schedule, s.message());
    exit_with(kFailed);
  }
  std::string mode = o.schedule + " schedule";
  if (o.early_push) mode += ", early push";
  if (o.chaos) mode += fmt::format(", chaos seed {}", *o.chaos);
  fmt::print("ok: {} {}: {}, {} workers: {} tasks run, {} inactive, {:.3f} ms (serial {:.3f} ms); "
             "outputs match the serial run\n",
             g.name.empty() ? o.file : g.name, ir::binding_str(binding), mode, o.workers, stats->tasks_run,
             stats->tasks_inactive, stats->wall_ms, serial->wall_ms);
}

void add_bind_option(CLI::App* cmd, std::vector<std::string>& binds, const char* help) {
  cmd->add_option("--bind", binds, help)->type_name("NAME=VALUE[,NAME=VALUE...]");
}

}  // namespace

void add_graph_command(CLI::App& app) {
  CLI::App* graph = app.add_subcommand("graph", "Verify, print and run Event Tensor graph files (*.evt)");
  graph->require_subcommand(1);

  auto verify_opts = std::make_shared<VerifyOptions>();
  CLI::App* verify = graph->add_subcommand(
      "verify", "Check a graph: shapes and ranks, wait counts, acyclicity, producers, data-dependent edges. "
                "Prints 'ok' or the errors (exit code 1).");
  verify->add_option("file", verify_opts->file, "graph file")->required()->check(CLI::ExistingFile);
  add_bind_option(verify, verify_opts->binds,
                  "a binding for the concrete checks; repeat for several (default: every dim = 1, 2, 3, 7, 16)");
  verify->add_flag("--static-only", verify_opts->static_only,
                   "allow data-dependent in-edges without an inverse (the graph will only run statically)");
  verify->add_flag("-v,--verbose", verify_opts->verbose, "also print what was proved and what was checked");
  verify->callback([verify_opts] { run_verify(*verify_opts); });

  auto print_opts = std::make_shared<PrintOptions>();
  CLI::App* print = graph->add_subcommand("print", "Print a graph in canonical text form");
  print->add_option("file", print_opts->file, "graph file")->required()->check(CLI::ExistingFile);
  print->add_option("--print-after", print_opts->print_after,
                    "run the compiler pipeline and print the graph after this pass (infer_wait_counts, verify)");
  print->callback([print_opts] { run_print(*print_opts); });

  auto run_opts = std::make_shared<RunOptions>();
  CLI::App* run = graph->add_subcommand(
      "run", "Run a graph on CPU worker threads with seeded inputs, check it against the serial run, "
             "and print a one-line summary");
  run->add_option("file", run_opts->file, "graph file")->required()->check(CLI::ExistingFile);
  add_bind_option(run, run_opts->binds, "values for the graph's dims, e.g. B=37");
  run->add_option("--schedule", run_opts->schedule, "static: per-worker queues; dynamic: a global ready queue")
      ->check(CLI::IsMember({"static", "dynamic"}))
      ->capture_default_str();
  run->add_option("--workers", run_opts->workers, "worker threads standing in for SMs")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  run->add_option("--chaos", run_opts->chaos, "seed for random delays and orders (chaos mode)");
  run->add_flag("--early-push", run_opts->early_push,
                "dynamic: enqueue consumers when their last producer starts, not when it finishes");
  run->add_option("--seed", run_opts->seed, "seed for the random inputs")->capture_default_str();
  run->add_option("--watchdog-ms", run_opts->watchdog_ms, "stop with a report after this long without progress")
      ->check(CLI::Range(1, 3600000))
      ->capture_default_str();
  run->add_flag("--no-verify", run_opts->no_verify,
                "skip the verifier (to exercise the run-time checks and the watchdog)");
  run->callback([run_opts] { run_run(*run_opts); });
}

}  // namespace evt::cli
