// The eventide binary end to end: exit codes and the lines users read.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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
