// The safetensors reader and writer, and checkpoint directories (single file and sharded).

#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "model/checkpoint.h"
#include "model/safetensors_writer.h"
#include "test_files.h"

namespace evt::model {
namespace {

using testing::as_byte_vector;
using testing::ScratchDir;
using testing::write_file;
using testing::write_raw_safetensors;
using testing::write_tensors;

std::string open_error(const std::filesystem::path& path) {
  auto f = SafetensorsFile::open(path);
  EXPECT_FALSE(f.ok());
  return f.status().message();
}

const std::vector<TensorSpec> kSpecs = {
    {.name = "b", .dtype = DType::kBF16, .shape = {2, 3}},
    {.name = "a", .dtype = DType::kF32, .shape = {4}},
    {.name = "c", .dtype = DType::kF16, .shape = {1, 2, 1}},
};
const std::vector<uint16_t> kB = {1, 2, 3, 4, 5, 0xffff};
const std::vector<float> kA = {0.5f, -1.0f, 3.25f, 1e-20f};
const std::vector<uint16_t> kC = {0x3c00, 0x7c00};

TEST(Safetensors, WriteThenReadBack) {
  ScratchDir dir;
  {
    auto writer = SafetensorsWriter::create(dir / "t.safetensors", kSpecs, {{"format", "pt"}});
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    // Chunks that straddle tensors are fine.
    std::vector<std::byte> all = as_byte_vector(kB);
    for (auto v : {as_byte_vector(kA), as_byte_vector(kC)}) all.insert(all.end(), v.begin(), v.end());
    ASSERT_TRUE(writer->write(std::span(all).first(5)).ok());
    ASSERT_TRUE(writer->write(std::span(all).subspan(5)).ok());
    ASSERT_TRUE(writer->finish().ok());
  }
  auto f = SafetensorsFile::open(dir / "t.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(f->tensors().size(), 3u);
  const TensorRef* b = f->find("b");
  const TensorRef* a = f->find("a");
  const TensorRef* c = f->find("c");
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(f->find("d"), nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->size_bytes, 12u);
  EXPECT_EQ(b->file, (dir / "t.safetensors").string());
  EXPECT_EQ(std::memcmp(b->data, kB.data(), 12), 0);
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(std::memcmp(a->data, kA.data(), 16), 0);
  EXPECT_EQ(c->dtype, DType::kF16);
  EXPECT_EQ(c->numel(), 2);
  EXPECT_EQ(std::memcmp(c->data, kC.data(), 4), 0);
  // The header is padded so the data starts 8-byte aligned in the file (and in the mapping).
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % 8, 0u);
}

TEST(Safetensors, TruncatedFileNamesFileAndTensor) {
  ScratchDir dir;
  const auto path = dir / "t.safetensors";
  write_tensors(path, kSpecs, {as_byte_vector(kB), as_byte_vector(kA), as_byte_vector(kC)});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 1);
  EXPECT_EQ(open_error(path), path.string() + ": tensor c: needs bytes [28, 32) of the data, but the file holds only "
                                              "31 (truncated?)");
}

TEST(Safetensors, BadHeaders) {
  ScratchDir dir;
  const auto path = dir / "bad.safetensors";
  const std::string p = path.string();

  write_file(path, "abc");
  EXPECT_EQ(open_error(path), p + ": 3 bytes is too small for a safetensors file");

  write_raw_safetensors(path, "{}", "", 1ull << 40);
  EXPECT_EQ(open_error(path), p + ": header length 1099511627776 is absurd (over 100 MiB); not a safetensors file?");

  write_raw_safetensors(path, "{}", "", 3);
  EXPECT_EQ(open_error(path), p + ": header length 3 runs past the end of the 10-byte file (truncated?)");

  write_raw_safetensors(path, "{\"x\": ", "");
  EXPECT_TRUE(open_error(path).starts_with(p + ": the header is not valid JSON: ")) << open_error(path);

  write_raw_safetensors(path, "[1]", "");
  EXPECT_EQ(open_error(path), p + ": the header is not a JSON object");

  write_raw_safetensors(path, R"({"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", "ab");
  EXPECT_EQ(open_error(path), p + ": tensor w: dtype F8_E4M3 is not supported (supported: BF16, F16, F32)");

  write_raw_safetensors(path, R"({"w": {"dtype": "BF16", "shape": [2, -1], "data_offsets": [0, 2]}})", "ab");
  EXPECT_EQ(open_error(path), p + ": tensor w: shape must be a list of non-negative integers, got [2,-1]");

  write_raw_safetensors(path, R"({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 4]}})", "abcd");
  EXPECT_EQ(open_error(path), p + ": tensor w: data_offsets [0, 4) hold 4 bytes, but BF16 [3] needs 6");

  write_raw_safetensors(path, R"({"w": {"dtype": "BF16", "shape": [1], "data_offsets": [2, 0]}})", "abcd");
  EXPECT_EQ(open_error(path), p + ": tensor w: data_offsets must be [begin, end] with begin <= end, got [2, 0]");

  write_raw_safetensors(path, R"({"w": {"dtype": "BF16", "shape": [1]}})", "abcd");
  EXPECT_EQ(open_error(path), p + ": tensor w: no data_offsets");

  write_raw_safetensors(path,
                        R"({"v": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                            "w": {"dtype": "BF16", "shape": [2], "data_offsets": [2, 6]}})",
                        "abcdef");
  EXPECT_EQ(open_error(path), p + ": tensors v and w overlap");

  write_raw_safetensors(path, R"({"__metadata__": {"format": 1}})", "");
  EXPECT_EQ(open_error(path), p + ": __metadata__ must map strings to strings");
}

TEST(Safetensors, HugeShapeDoesNotOverflow) {
  ScratchDir dir;
  const auto path = dir / "huge.safetensors";
  write_raw_safetensors(
      path, R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 0]}})", "");
  EXPECT_EQ(open_error(path), path.string() + ": tensor w: data_offsets [0, 0) hold 0 bytes, but F32 "
                                              "[4294967296, 4294967296, 16] needs 18446744073709551615");
}

// --- Checkpoint directories

void write_index(const std::filesystem::path& dir, const std::string& weight_map) {
  write_file(dir / kIndexFileName, R"({"metadata": {"total_size": 40}, "weight_map": )" + weight_map + "}");
}

TEST(Checkpoint, SingleFile) {
  ScratchDir dir;
  write_tensors(dir / kSingleFileName, kSpecs, {as_byte_vector(kB), as_byte_vector(kA), as_byte_vector(kC)});
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_EQ(ckpt->num_files(), 1u);
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"a", "b", "c"}));
  auto a = ckpt->find("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(std::memcmp(a->data, kA.data(), 16), 0);
  auto missing = ckpt->find("model.norm.weight");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), (dir / kSingleFileName).string() + ": missing tensor model.norm.weight");
}

TEST(Checkpoint, ShardedIndexMapsEachShardOnce) {
  ScratchDir dir;
  write_tensors(dir / "model-00001-of-00002.safetensors", {kSpecs[0], kSpecs[1]}, {as_byte_vector(kB), as_byte_vector(kA)});
  write_tensors(dir / "model-00002-of-00002.safetensors", {kSpecs[2]}, {as_byte_vector(kC)});
  write_index(dir.path(), R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                              "c": "model-00002-of-00002.safetensors"})");
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_EQ(ckpt->num_files(), 2u);
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"a", "b", "c"}));
  auto c = ckpt->find("c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->file, (dir / "model-00002-of-00002.safetensors").string());
  EXPECT_EQ(std::memcmp(c->data, kC.data(), 4), 0);
  auto missing = ckpt->find("d");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), (dir / kIndexFileName).string() + ": missing tensor d");
}

TEST(Checkpoint, IndexErrors) {
  ScratchDir dir;
  write_tensors(dir / "model-00001-of-00001.safetensors", {kSpecs[0]}, {as_byte_vector(kB)});

  write_index(dir.path(), R"({"b": "model-00001-of-00001.safetensors", "a": "model-00001-of-00001.safetensors"})");
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().message(), (dir / "model-00001-of-00001.safetensors").string() +
                                         ": missing tensor a (model.safetensors.index.json says it is there)");

  write_index(dir.path(), R"({"b": "model-00002-of-00002.safetensors"})");
  ckpt = Checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_TRUE(ckpt.status().message().starts_with((dir / "model-00002-of-00002.safetensors").string() +
                                                  ": cannot open"))
      << ckpt.status().message();

  write_index(dir.path(), R"({"b": "../elsewhere.safetensors"})");
  ckpt = Checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().message(), (dir / kIndexFileName).string() +
                                         ": weight_map entry for b must be a file name in the same directory, got "
                                         "\"../elsewhere.safetensors\"");

  write_file(dir / kIndexFileName, R"({"metadata": {}})");
  ckpt = Checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().message(),
            (dir / kIndexFileName).string() + ": expected an object with a \"weight_map\" object");
}

TEST(Checkpoint, EmptyDirectory) {
  ScratchDir dir;
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().message(),
            dir.path().string() + ": neither model.safetensors nor model.safetensors.index.json is there");
}

}  // namespace
}  // namespace evt::model
