// The eventide binary end to end: exit codes and the lines users read.

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ir/text_form.h"
#include "support/run_binary.h"

namespace {

using Result = evt::testing::CliResult;
Result run(const std::string& args) { return evt::testing::run_eventide(args); }

std::string example(const std::string& name) { return std::string(EVT_SOURCE_DIR) + "/examples/" + name; }

std::string temp_copy_with(const std::string& name, const std::string& from, const std::string& to) {
  std::ifstream in(example(name));
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  text.replace(text.find(from), from.size(), to);
  const auto path = std::filesystem::temp_directory_path() / ("eventide_cli_" + std::to_string(getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(Cli, VerifyPrintsOk) {
  Result r = run("graph verify " + example("splitk.evt") + " --bind B=17");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "ok\n");
}

TEST(Cli, VerifyVerboseSaysWhatWasProved) {
  Result r = run("graph verify -v " + example("splitk.evt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("E: wait_count=4 proved for every binding"), std::string::npos) << r.output;
}

TEST(Cli, VerifyCatchesChangedWaitCountAndNamesTheEvent) {
  const std::string bad = temp_copy_with("splitk.evt", "wait_count=4", "wait_count=5");
  Result r = run("graph verify " + bad + " --bind B=17");
  std::filesystem::remove(bad);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("event E: E[0] has wait_count=5 but receives 4 notifications"), std::string::npos) << r.output;
}

TEST(Cli, RunSplitKDynamicChaosAndStatic) {
  for (const std::string schedule : {"dynamic --chaos 7", "static", "static --chaos 7", "dynamic --early-push"}) {
    Result r = run("graph run " + example("splitk.evt") + " --bind B=37 --schedule " + schedule);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("ok: splitk B=37"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("185 tasks run"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("outputs match the serial run"), std::string::npos) << r.output;
  }
}

TEST(Cli, RunMoeRouted) {
  Result r = run("graph run " + example("moe_routed.evt") + " --bind B=37 --schedule dynamic --chaos 3 --workers 6");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok: moe_routed B=37"), std::string::npos) << r.output;
}

TEST(Cli, RunWithWrongCountAndNoVerifyStopsWithReport) {
  const std::string bad = temp_copy_with("splitk.evt", "wait_count=4", "wait_count=5");
  Result r = run("graph run " + bad + " --bind B=5 --schedule static --no-verify --watchdog-ms 200");
  std::filesystem::remove(bad);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("static run failed: no progress for 200 ms"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 of 5 notifications missing"), std::string::npos) << r.output;
}

TEST(Cli, PrintRoundTrips) {
  Result r = run("graph print " + example("moe_routed.evt"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto printed = evt::ir::parse_graph(r.output);
  auto original = evt::ir::load_graph_file(example("moe_routed.evt"));
  ASSERT_TRUE(printed.ok()) << printed.status().message();
  ASSERT_TRUE(original.ok());
  EXPECT_TRUE(*printed == *original);
}

TEST(Cli, PrintAfterInferenceShowsInferredCounts) {
  Result r = run("graph print " + example("moe_routed.evt") + " --print-after infer_wait_counts");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Routed = event((1,), wait_count=B)"), std::string::npos) << r.output;
}

TEST(Cli, BadArgumentsAreUsageErrors) {
  EXPECT_EQ(run("graph run " + example("splitk.evt") + " --bind B=x").exit_code, 2);
  EXPECT_EQ(run("graph run " + example("splitk.evt") + " --schedule sideways").exit_code, 2);
  Result missing = run("graph verify /nonexistent.evt");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("/nonexistent.evt"), std::string::npos) << missing.output;
  Result unbound = run("graph run " + example("splitk.evt"));
  EXPECT_EQ(unbound.exit_code, 1);
  EXPECT_NE(unbound.output.find("no value for dimension 'B'"), std::string::npos) << unbound.output;
}

}  // namespace

namespace evt::testing {
namespace {

std::string fixture(const std::string& name) { return std::string(EVT_SOURCE_DIR) + "/tests/fixtures/" + name; }

// The line "prompt 0 (N tokens) -> ids" of a generate run.
std::string token_line(const std::string& output, int prompt) {
  const std::string key = "prompt " + std::to_string(prompt) + " (";
  const size_t at = output.find(key);
  if (at == std::string::npos) return "";
  return output.substr(at, output.find('\n', at) - at);
}

TEST(CliGenerate, PrintsHuggingFaceGreedyTokensAndLatency) {
  // qwen3-tiny repeats the last prompt token (tests/fixtures/README.md); HF's greedy for [165].
  const CliResult r = run_eventide("generate --device cpu --model " + fixture("qwen3-tiny") +
                                   " --prompt-ids 165 --max-tokens 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(token_line(r.output, 0), "prompt 0 (1 tokens) -> 165,165,165,165") << r.output;
  EXPECT_NE(r.output.find("ms/token"), std::string::npos) << r.output;
}

TEST(CliGenerate, EveryCpuExecModeGivesTheSameBatchTokens) {
  std::string first;
  for (const char* exec : {"reference", "megakernel", "megakernel-dynamic", "kernels"}) {
    const CliResult r = run_eventide("generate --device cpu --model " + fixture("llama-tiny") +
                                     " --prompt-ids 1,2,3 --prompt-ids 900,5 --max-tokens 6 --exec " + exec);
    ASSERT_EQ(r.exit_code, 0) << exec << "\n" << r.output;
    const std::string tokens = token_line(r.output, 0) + token_line(r.output, 1);
    if (first.empty()) first = tokens;
    EXPECT_EQ(tokens, first) << exec;
  }
}

TEST(CliGenerate, BadInputIsRefusedByName) {
  const std::string model = " --model " + fixture("llama-tiny");
  struct Bad {
    std::string args, message;
    int code;
  };
  for (const Bad& b : std::vector<Bad>{
           {"--device cpu" + model + " --prompt-ids 1,x", "'x' is not a token id", 2},
           {"--device cpu" + model + " --prompt-ids 1,5000", "prompt 0 token 1 is id 5000, outside the vocab of 1024", 1},
           {"--device cpu" + model + " --prompt-ids 1 --exec graphs", "--exec graphs needs --device cuda", 2},
           {"--device cpu" + model + " --prompt-ids 1 --exec fast", "expected one of reference, megakernel", 2},
           {"--device cpu --prompt-ids 1", "pass either --model DIR or --random-weights", 2},
           {"--device cpu --model /nonexistent --prompt-ids 1", "/nonexistent", 1},
           {"--device cpu --random-weights --preset qwen3-8b --prompt-ids 1", "generates weights on the GPU", 2},
           {"--device cpu" + model + " --prompt hi --prompt-ids 1", "--prompt excludes --prompt-ids", 2},
           {"--device cpu" + model, "pass either --prompt TEXT or --prompt-ids IDS", 2},
           {"--device cpu" + model + " --prompt-ids 1 --chat", "--chat requires --prompt", 2},
           {"--device cpu" + model + " --prompt hi --no-thinking", "--no-thinking requires --chat", 2},
           {"--device cpu --random-weights --preset qwen3-8b --prompt hi", "--prompt needs --model DIR", 2},
           // A folder without tokenizer.json (it is read before the weights).
           {"--device cpu --model " + ::testing::TempDir() + " --prompt hi", "tokenizer.json does not exist", 1},
       }) {
    const CliResult r = run_eventide("generate " + b.args);
    EXPECT_EQ(r.exit_code, b.code) << b.args << "\n" << r.output;
    EXPECT_NE(r.output.find(b.message), std::string::npos) << b.args << "\n" << r.output;
  }
}

// eventide tune on the CPU backend (wall time): a table with an entry per (batch, context) that
// generate then takes, and refuses for another model's shapes or when malformed.
TEST(CliTune, WritesATableThatGenerateTakesForTheSameShapesOnly) {
  const std::string table = ::testing::TempDir() + "/eventide_tune_" + std::to_string(getpid()) + ".json";
  const CliResult tune = run_eventide("tune --device cpu --model " + fixture("qwen3-tiny") +
                                      " --batch 1,2 --ctx 40 --reps 1 --warmup 0 --out " + table);
  ASSERT_EQ(tune.exit_code, 0) << tune.output;
  EXPECT_NE(tune.output.find("wrote " + table), std::string::npos) << tune.output;
  std::ifstream in(table);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["entries"].size(), 2u) << j.dump();
  for (const auto& e : j["entries"]) {
    EXPECT_EQ(e["context"], 41) << j.dump();
    EXPECT_GE(e["qkv_splits"].get<int>(), 1) << j.dump();
    EXPECT_GE(e["kv_splits"].get<int>(), 1) << j.dump();
    EXPECT_LE(e["ms"].get<double>(), e["default_ms"].get<double>()) << j.dump();
  }

  const CliResult tuned = run_eventide("generate --device cpu --model " + fixture("qwen3-tiny") +
                                       " --prompt-ids 165 --max-tokens 4 --tuning " + table);
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  EXPECT_EQ(token_line(tuned.output, 0), "prompt 0 (1 tokens) -> 165,165,165,165") << tuned.output;

  const CliResult other = run_eventide("generate --device cpu --model " + fixture("llama-tiny") +
                                       " --prompt-ids 1 --max-tokens 1 --tuning " + table);
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("--tuning " + table + ": the tuning table was measured for a model of"),
            std::string::npos)
      << other.output;

  const CliResult retune = run_eventide("tune --device cpu --model " + fixture("qwen3-tiny") +
                                        " --batch 1 --ctx 8 --out " + table + ".2 --tuning " + table);
  EXPECT_EQ(retune.exit_code, 2) << retune.output;
  EXPECT_NE(retune.output.find("--tuning: tune measures split counts itself"), std::string::npos) << retune.output;

  std::ofstream(table) << R"({"shapes": "x", "device": "d", "exec": "e", "entries": [{"tokens": 1}]})";
  const CliResult bad = run_eventide("generate --device cpu --model " + fixture("qwen3-tiny") +
                                     " --prompt-ids 1 --max-tokens 1 --tuning " + table);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find(table + ": entry 0: \"context\" must be an integer"), std::string::npos) << bad.output;
}

// A text prompt goes through the fixture's tokenizer.json (11 ids, as `tokenizers` encodes it), and
// the new tokens come back as text: qwen3-tiny repeats the last prompt token, ":".
TEST(CliGenerate, TextPromptPrintsText) {
  const CliResult r = run_eventide("generate --device cpu --model " + fixture("qwen3-tiny") +
                                   " --prompt 'def fibonacci(n):' --max-tokens 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(token_line(r.output, 0), "prompt 0 (11 tokens) -> 25,25,25,25") << r.output;
  EXPECT_NE(r.output.find("text 0: \"::::\"\n"), std::string::npos) << r.output;
  // Llama's tokenizer puts <|begin_of_text|> first, as transformers' tokenizer(text) does.
  const CliResult llama = run_eventide("generate --device cpu --model " + fixture("llama-tiny") +
                                       " --prompt 'def fibonacci(n):' --max-tokens 4");
  ASSERT_EQ(llama.exit_code, 0) << llama.output;
  EXPECT_NE(llama.output.find("prompt 0 (13 tokens) -> "), std::string::npos) << llama.output;
}

// --chat renders the prompt as one user turn and the assistant's header; --no-thinking adds
// Qwen3's empty "<think>\n\n</think>\n\n". The counts are `tokenizers`' for the rendered text,
// and qwen3-tiny then repeats the last token, "\n" (198) or "\n\n" (295).
TEST(CliGenerate, ChatPromptGoesThroughTheTemplate) {
  const std::string args = "generate --device cpu --model " + fixture("qwen3-tiny") + " --prompt hello --max-tokens 2";
  const CliResult chat = run_eventide(args + " --chat");
  ASSERT_EQ(chat.exit_code, 0) << chat.output;
  EXPECT_EQ(token_line(chat.output, 0), "prompt 0 (15 tokens) -> 198,198") << chat.output;
  EXPECT_NE(chat.output.find("text 0: \"\\n\\n\"\n"), std::string::npos) << chat.output;
  const CliResult no_thinking = run_eventide(args + " --chat --no-thinking");
  ASSERT_EQ(no_thinking.exit_code, 0) << no_thinking.output;
  EXPECT_EQ(token_line(no_thinking.output, 0), "prompt 0 (19 tokens) -> 295,295") << no_thinking.output;
}

// The CPU smoke run of the serving benchmark (issue: the same workload shape as the GPU's, scaled
// to the fixture's 256 positions): every request completes, nothing is compiled or captured,
// and the KV pool ends empty.
TEST(CliBenchEngine, CpuSmokeRunCompletesEveryRequest) {
  const std::string json = ::testing::TempDir() + "bench_engine.json";
  const CliResult r = run_eventide("bench engine --device cpu --model " + fixture("qwen3-tiny") +
                                   " --num-prompts 16 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["requests"], 16);
  EXPECT_GE(j["output_tokens"].get<int64_t>(), 16 * 12);  // outputs scaled to 12-51 tokens each
  EXPECT_EQ(j["compilations"], 0);
  EXPECT_EQ(j["graphs_captured"], 0);
  EXPECT_EQ(j["kv_pages_used_at_end"], 0);
  EXPECT_GT(j["distinct_batch_shapes"].get<int64_t>(), 1);
  EXPECT_NE(r.output.find("TTFT ms"), std::string::npos) << r.output;
}

TEST(CliBenchEngine, BadFlagsAreUsageErrors) {
  const std::string model = " --device cpu --model " + fixture("qwen3-tiny");
  for (const std::string& args : {model + " --input-len-min 10 --input-len-max 5", model + " --chunk-size -1",
                                  std::string(" --device cpu")}) {
    const CliResult r = run_eventide("bench engine" + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  }
}

// `eventide serve` in the background on a free loopback port (it picks one with --port 0 and
// names it in its ready line), its output in a log file, stopped with SIGTERM.
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& args) {
    log_ = ::testing::TempDir() + "eventide_serve_" + std::to_string(getpid()) + ".log";
    const std::string cmd = "exec " + std::string(EVT_BINARY) + " serve --port 0 " + args + " > " + log_ + " 2>&1";
    pid_ = fork();
    if (pid_ == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const std::regex ready(R"(ready: serving \S+ at (http://[0-9.]+:[0-9]+))");
    for (int i = 0; i < 600 && url_.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::smatch m;
      const std::string text = log();
      if (std::regex_search(text, m, ready)) url_ = m[1];
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    std::filesystem::remove(log_);
  }
  const std::string& url() const { return url_; }  // empty: it never got ready
  std::string log() const {
    std::ifstream in(log_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

 private:
  pid_t pid_ = -1;
  std::string log_, url_;
};

// The CI run of the serving benchmark: eventide serve on the qwen3-tiny fixture, 8 requests at
// once, every one completing with exactly its 8 tokens, and the JSON saying so.
TEST(CliBenchServe, MeasuresAServerOnTheTinyFixture) {
  ServeProcess server("--device cpu --workers 2 --model " + fixture("qwen3-tiny"));
  ASSERT_FALSE(server.url().empty()) << server.log();
  const std::string json = ::testing::TempDir() + "bench_serve.json";
  const CliResult r = run_eventide("bench serve --url " + server.url() +
                                   " --num-prompts 8 --request-rate inf --random-input-len 16 --random-output-len 8 "
                                   "--commit abc123 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output << "\n" << server.log();
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["completed"], 8) << j.dump(2);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["total_input_tokens"], 8 * 16);
  EXPECT_EQ(j["total_output_tokens"], 8 * 8);
  EXPECT_EQ(j["model_id"], "qwen3-tiny");
  EXPECT_EQ(j["commit"], "abc123");
  EXPECT_NE(j["command"].get<std::string>().find("bench serve --url"), std::string::npos);
  EXPECT_GT(j["median_tpot_ms"].get<double>(), 0);
  for (const char* metric : {"ttft", "tpot", "itl", "e2el"}) {
    const std::string m = metric;
    EXPECT_GE(j["p99_" + m + "_ms"].get<double>(), j["median_" + m + "_ms"].get<double>()) << m;
    EXPECT_GE(j["p90_" + m + "_ms"].get<double>(), j["median_" + m + "_ms"].get<double>()) << m;
  }
  EXPECT_GT(j["request_throughput"].get<double>(), 0);
  EXPECT_GT(j["total_token_throughput"].get<double>(), j["output_throughput"].get<double>());
  EXPECT_NE(r.output.find("Serving Benchmark Result"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("P99 ITL (ms):"), std::string::npos) << r.output;
  // The chat endpoint, paced and limited, on the same server.
  const CliResult c = run_eventide("bench serve --url " + server.url() +
                                   " --endpoint chat --num-prompts 4 --request-rate 50 --max-concurrency 2 "
                                   "--random-input-len 8 --random-output-len 4 --random-range-ratio 0.5");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("Successful requests:                     4"), std::string::npos) << c.output;
}

// --random-weights takes the repo's tokenizer of the preset's family (read before the weights, so
// on the CPU the command gets as far as refusing random weights there); --tokenizer overrides it.
TEST(CliServe, RandomWeightsFindTheRepoTokenizer) {
  const CliResult random = run_eventide("serve --random-weights --preset qwen3-0.6b --device cpu --port 0");
  EXPECT_EQ(random.exit_code, 2) << random.output;
  EXPECT_NE(random.output.find("--random-weights generates weights on the GPU"), std::string::npos) << random.output;
  const CliResult missing = run_eventide("serve --device cpu --port 0 --tokenizer /nonexistent");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("/nonexistent/tokenizer.json"), std::string::npos) << missing.output;
}

TEST(CliBenchServe, BadFlagsAndNoServer) {
  for (const std::string& args : {std::string("--request-rate 0"), std::string("--request-rate fast"),
                                  std::string("--url localhost:8000"), std::string("--endpoint embeddings")}) {
    const CliResult r = run_eventide("bench serve " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  }
  // Port 1 on loopback: nothing listens there.
  const CliResult r = run_eventide("bench serve --url http://127.0.0.1:1 --num-prompts 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("GET http://127.0.0.1:1/v1/models"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace evt::testing
