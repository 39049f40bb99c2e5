// The LLM tile bodies (src/kernels/llm/*.h) run on the CPU against their registry rows' naive
// references, tile by tile over every case of llm_tile_cases.h: outputs poisoned first, compared
// with the per-dtype tolerance table, nothing written outside the row's contract. The must-fail
// tests show that the comparison notices a perturbed input and a skipped tile, so a pass means
// something. The GPU side of the same cases is llm_tiles_gpu_test.cc.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "kernels/llm/attention_merge.h"
#include "kernels/llm/decode_attention.h"
#include "kernels/llm/down_proj.h"
#include "kernels/llm/embed_gather.h"
#include "kernels/llm/gate_up_silu.h"
#include "kernels/llm/lm_head.h"
#include "kernels/llm/o_proj.h"
#include "kernels/llm/qkv_finish.h"
#include "kernels/llm/qkv_proj.h"
#include "kernels/llm/sample.h"
#include "kernels/llm_tile_check.h"
#include "kernels/registry.h"
#include "kernels/tile_body.h"
#include "support/source_dir.h"

namespace evt::testing::llm {
namespace {

using kernels::Registry;
using kernels::TileFunction;

// The bodies on the host's one-thread block. `body` and `stream` are spelled as the registry's
// device_body and device_stream name them, which the coverage test checks, so each row is tested
// with the body the megakernel calls, reading the stream its loader would fill.
struct CpuBody {
  const char* row;
  const char* body;
  const char* stream;
  int num_reads, num_writes;
  kernels::CpuTileFn run;
};
#define EVT_CPU_BODY(row, body, stream, reads, writes) \
  CpuBody { row, #body, #stream, reads, writes, &kernels::run_body_on_cpu<&body<kernels::SerialBlock>, reads, writes> }
const CpuBody kCpuBodies[] = {
#define EVT_LLM_BODY(tag, row, body, stream, reads, writes) EVT_CPU_BODY(row, body, stream, reads, writes),
#include "kernels/llm_tile_bodies.inc"
#undef EVT_LLM_BODY
};
#undef EVT_CPU_BODY

const CpuBody* find_body(const std::string& row) {
  for (const CpuBody& b : kCpuBodies) {
    if (row == b.row) return &b;
  }
  return nullptr;
}

const TileFunction& registry_row(const std::string& row) {
  const TileFunction* fn = Registry::builtins().find(row);
  EXPECT_NE(fn, nullptr) << "no registry row " << row;
  static const TileFunction kNone{};
  return fn != nullptr ? *fn : kNone;
}

// A run's reference and body images of one case.
struct Outputs {
  std::vector<GuardedImage> body, reference;
};

// The reference runs on `c`, the body on `body_case` (the same case, or a perturbed copy).
Outputs run_both(const Case& c, const Case& body_case, int64_t skip_body_tile = -1) {
  Outputs out{poisoned_outputs(c), poisoned_outputs(c)};
  run_on_cpu(c, registry_row(c.spec.row).cpu, out.reference);
  run_on_cpu(body_case, find_body(c.spec.row)->run, out.body, skip_body_tile);
  return out;
}

// Every function the dense decode graph calls is an LLM row here, with a registry row whose
// counts and body match the table above, and with cases.
TEST(LlmTileCoverage, EveryDecodeGraphFunctionHasABodyAndCases) {
  const std::string path = evt::testing::source_dir() + "/src/model/graphs/dense_decode.evt.in";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  const std::string graph = text.str();
  std::set<std::string> called;
  const std::regex call(R"(call_device\(\s*([A-Za-z0-9_@]+))");
  for (auto it = std::sregex_iterator(graph.begin(), graph.end(), call); it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1];
    const auto at = name.find("@D@");
    if (at == std::string::npos) {
      called.insert(name);
    } else {
      for (const char* d : {"64", "128"}) called.insert(std::string(name).replace(at, 3, d));
    }
  }
  ASSERT_GE(called.size(), 12u) << "the regex no longer finds the graph's call_device lines";
  const std::set<std::string> rows(llm_rows().begin(), llm_rows().end());
  for (const std::string& name : called)
    EXPECT_TRUE(rows.count(name)) << name << " is called by the graph but has no cases";

  for (const std::string& row : llm_rows()) {
    SCOPED_TRACE(row);
    const TileFunction* fn = Registry::builtins().find(row);
    ASSERT_NE(fn, nullptr);
    const CpuBody* body = find_body(row);
    ASSERT_NE(body, nullptr) << "no entry in kCpuBodies";
    EXPECT_EQ(fn->device_body, body->body);
    EXPECT_EQ(fn->device_stream, std::string(body->stream) == "evt::testing::llm::no_stream" ? "" : body->stream);
    EXPECT_EQ(fn->num_reads, body->num_reads);
    EXPECT_EQ(fn->num_writes, body->num_writes);
    int cases = 0;
    for (const CaseSpec& s : llm_case_specs()) cases += s.row == row;
    EXPECT_GE(cases, 4);
  }
}

class LlmTiles : public ::testing::TestWithParam<CaseSpec> {};

TEST_P(LlmTiles, BodyMatchesReference) {
  const Case c = build_case(GetParam());
  const TileFunction& fn = registry_row(c.spec.row);
  ASSERT_EQ(static_cast<int>(c.reads.size()), fn.num_reads);
  ASSERT_EQ(static_cast<int>(c.writes.size()), fn.num_writes);
  std::vector<std::vector<std::byte>> reads_before;
  for (const HostTensor& t : c.reads) reads_before.push_back(t.bytes);

  const Outputs out = run_both(c, c);
  const std::vector<OutputReport> reports = compare_outputs(c, out.body, out.reference);
  for (const OutputReport& r : reports) {
    std::cout << "[ max err  ] " << c.spec.row << " " << c.name << " " << r.summary() << "\n";
    EXPECT_TRUE(r.checks_something()) << r.buffer << ": the case checks nothing";
  }
  EXPECT_TRUE(all_ok(reports)) << describe_failures(reports);
  for (size_t k = 0; k < c.reads.size(); ++k)
    EXPECT_TRUE(c.reads[k].bytes == reads_before[k]) << c.reads[k].name << " was written";
}

std::string spec_test_name(const ::testing::TestParamInfo<CaseSpec>& info) {
  return info.param.row + "_" + case_name(info.param);
}

INSTANTIATE_TEST_SUITE_P(Cases, LlmTiles, ::testing::ValuesIn(llm_case_specs()), spec_test_name);

// The comparison is not vacuous: for every row, a wrong input or a missing tile fails it.
class LlmTilesMustFail : public ::testing::TestWithParam<std::string> {
 protected:
  // The row's first case that has a probe.
  static Case first_case(const std::string& row) {
    for (const CaseSpec& s : llm_case_specs()) {
      if (s.row == row) {
        Case c = build_case(s);
        if (c.probe.read >= 0) return c;
      }
    }
    ADD_FAILURE() << "no case of " << row << " has a probe";
    return Case{};
  }
};

TEST_P(LlmTilesMustFail, PerturbedInputIsCaught) {
  const Case c = first_case(GetParam());
  ASSERT_FALSE(c.reads.empty());
  Case perturbed = c;
  bind_host_weights(perturbed);  // the copy's wtab must point at the copy's weights
  perturb(perturbed.reads[static_cast<size_t>(c.probe.read)], c.probe.element);
  const Outputs out = run_both(c, perturbed);
  const std::vector<OutputReport> reports = compare_outputs(c, out.body, out.reference);
  EXPECT_FALSE(all_ok(reports)) << c.name << ": perturbing "
                                << c.reads[static_cast<size_t>(c.probe.read)].element_name(c.probe.element)
                                << " went unnoticed";
}

TEST_P(LlmTilesMustFail, SkippedTileIsCaught) {
  const Case c = first_case(GetParam());
  ASSERT_FALSE(c.reads.empty());
  const Outputs out = run_both(c, c, c.tile_count() - 1);
  const std::vector<OutputReport> reports = compare_outputs(c, out.body, out.reference);
  EXPECT_FALSE(all_ok(reports)) << c.name << ": the body skipped its last tile unnoticed";
}

std::string row_test_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Rows, LlmTilesMustFail, ::testing::ValuesIn(llm_rows()), row_test_name);

}  // namespace
}  // namespace evt::testing::llm
