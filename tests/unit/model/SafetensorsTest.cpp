// safetensors reader validation (every malformed-file case names file and tensor) and the
// atomic writers.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "ModelTestFiles.h"
#include "model/Safetensors.h"

using namespace deepinfer;
using deepinfer::testing_util::failsWith;
using deepinfer::testing_util::ScratchDir;
using deepinfer::testing_util::writeRawSafetensors;

namespace {

RawTensor randomRaw(const std::string& dtype, std::vector<int64_t> shape, uint32_t seed) {
  RawTensor t{dtype, std::move(shape), {}};
  size_t n = safetensorsDtypeSize(dtype);
  for (int64_t d : t.shape) n *= size_t(d);
  std::mt19937 rng(seed);
  t.bytes.resize(n);
  for (uint8_t& b : t.bytes) b = uint8_t(rng());
  return t;
}

bool noTempFiles(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return false;
  return true;
}

}  // namespace

TEST(Safetensors, DtypeSizes) {
  EXPECT_EQ(safetensorsDtypeSize("BF16"), 2u);
  EXPECT_EQ(safetensorsDtypeSize("F16"), 2u);
  EXPECT_EQ(safetensorsDtypeSize("F32"), 4u);
  EXPECT_EQ(safetensorsDtypeSize("I32"), 4u);
  EXPECT_EQ(safetensorsDtypeSize("I64"), 8u);
  EXPECT_EQ(safetensorsDtypeSize("I8"), 1u);
  EXPECT_EQ(safetensorsDtypeSize("U8"), 1u);
  EXPECT_EQ(safetensorsDtypeSize("F8_E4M3"), 1u);
  EXPECT_EQ(safetensorsDtypeSize("F8_E8M0"), 1u);
  EXPECT_EQ(safetensorsDtypeSize("F64"), 0u);
  EXPECT_EQ(safetensorsDtypeSize("bf16"), 0u);
}

TEST(Safetensors, WriteReadRoundTripAllDtypes) {
  ScratchDir dir("st_roundtrip");
  std::map<std::string, RawTensor> in;
  uint32_t seed = 1;
  for (const char* dt : {"BF16", "F16", "F32", "I32", "I64", "I8", "U8", "F8_E4M3", "F8_E8M0"})
    in.emplace(fmt::format("t.{}", dt), randomRaw(dt, {3, 5}, seed++));
  in.emplace("scalar_like", randomRaw("F32", {1}, 99));
  in.emplace("empty", RawTensor{"F32", {0, 4}, {}});
  const std::string path = dir.file("x.safetensors");
  ASSERT_TRUE(writeSafetensors(path, in).ok());
  EXPECT_TRUE(noTempFiles(dir.path()));
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ((*f)->entries().size(), in.size());
  for (const auto& [name, t] : in) {
    const SafetensorsEntry* e = (*f)->find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->dtype, t.dtype);
    EXPECT_EQ(e->shape, t.shape);
    ASSERT_EQ(e->byteSize(), t.bytes.size());
    EXPECT_EQ(0, std::memcmp((*f)->data(*e), t.bytes.data(), t.bytes.size())) << name;
  }
  EXPECT_EQ((*f)->find("missing"), nullptr);
}

TEST(Safetensors, HostTensorRoundTrip) {
  ScratchDir dir("st_host");
  TensorMap m;
  HostTensor a(DType::BF16, {2, 3});
  for (size_t i = 0; i < a.bytes.size(); ++i) a.bytes[i] = uint8_t(i * 13 + 1);
  HostTensor b(DType::I64, {4});
  for (size_t i = 0; i < b.bytes.size(); ++i) b.bytes[i] = uint8_t(i * 5 + 2);
  m.emplace("a", a);
  m.emplace("b", b);
  ASSERT_TRUE(writeSafetensors(dir.file("h.safetensors"), m).ok());
  auto back = readSafetensorsToHost(dir.file("h.safetensors"));
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ(back->at("a").dtype, DType::BF16);
  EXPECT_EQ(back->at("a").shape, a.shape);
  EXPECT_EQ(back->at("a").bytes, a.bytes);
  EXPECT_EQ(back->at("b").bytes, b.bytes);

  // F8 tensors cannot become host tensors: the error names the tensor.
  std::map<std::string, RawTensor> raw{{"codes", randomRaw("F8_E4M3", {4}, 3)}};
  ASSERT_TRUE(writeSafetensors(dir.file("f8.safetensors"), raw).ok());
  EXPECT_TRUE(failsWith(readSafetensorsToHost(dir.file("f8.safetensors")), {"f8.safetensors", "'codes'", "F8_E4M3"}));
}

TEST(Safetensors, WriterRejectsBadTensorsAndLeavesNoFile) {
  ScratchDir dir("st_writer");
  const std::string path = dir.file("bad.safetensors");
  std::map<std::string, RawTensor> wrongBytes{{"w", RawTensor{"F32", {2, 2}, std::vector<uint8_t>(15)}}};
  EXPECT_TRUE(failsWith(writeSafetensors(path, wrongBytes), {"'w'", "15 bytes", "needs 16"}));
  std::map<std::string, RawTensor> badDtype{{"w", RawTensor{"F64", {1}, std::vector<uint8_t>(8)}}};
  EXPECT_TRUE(failsWith(writeSafetensors(path, badDtype), {"'w'", "unknown dtype 'F64'"}));
  std::map<std::string, RawTensor> reserved{{"__metadata__", RawTensor{"U8", {1}, {1}}}};
  EXPECT_TRUE(failsWith(writeSafetensors(path, reserved), {"__metadata__", "reserved"}));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(noTempFiles(dir.path()));

  // A failing producer aborts the streamed write: the old file stays as it was.
  std::map<std::string, RawTensor> good{{"v", randomRaw("U8", {7}, 5)}};
  ASSERT_TRUE(writeSafetensors(path, good).ok());
  const auto before = testing_util::readBytes(path);
  Status st = writeSafetensorsStreamed(path, {TensorSpec{"v", "U8", {7}}, TensorSpec{"u", "U8", {2}}},
                                       [](size_t i, const TensorSpec&, std::vector<uint8_t>& bytes) -> Status {
                                         if (i == 1) return Error{"producer failed"};
                                         bytes.assign(7, 1);
                                         return {};
                                       });
  EXPECT_TRUE(failsWith(st, {"producer failed"}));
  EXPECT_EQ(testing_util::readBytes(path), before);
  EXPECT_TRUE(noTempFiles(dir.path()));
}

TEST(SafetensorsErrors, TruncatedAndBadHeaderLength) {
  ScratchDir dir("st_errors");
  const std::string hdr = R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  const std::string p = dir.file("model-00002.safetensors");

  testing_util::writeBytes(p, {1, 2, 3});
  EXPECT_TRUE(failsWith(SafetensorsFile::open(p), {"model-00002.safetensors", "too short", "truncated"}));

  writeRawSafetensors(p, hdr, 24, /*headerLenOverride=*/0);
  EXPECT_TRUE(failsWith(SafetensorsFile::open(p), {"model-00002.safetensors", "header length 0"}));
  writeRawSafetensors(p, hdr, 24, int64_t(hdr.size()) + 1000);
  EXPECT_TRUE(failsWith(SafetensorsFile::open(p), {"model-00002.safetensors", "header length", "out of range"}));
  writeRawSafetensors(p, hdr, 24, int64_t(1) << 40);
  EXPECT_TRUE(failsWith(SafetensorsFile::open(p), {"header length 1099511627776"}));

  // Data cut short: the tensor's offsets run past the data section.
  writeRawSafetensors(p, R"({"layers.3.attn.wq_a.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", 20);
  EXPECT_TRUE(failsWith(SafetensorsFile::open(p), {"model-00002.safetensors", "'layers.3.attn.wq_a.weight'",
                                                   "[0, 24]", "data size 20", "truncated"}));

  EXPECT_TRUE(failsWith(SafetensorsFile::open(dir.file("nope.safetensors")), {"nope.safetensors", "cannot open"}));

  // The valid file opens (the cases above fail for their stated reason only).
  writeRawSafetensors(p, hdr, 24);
  EXPECT_TRUE(SafetensorsFile::open(p).ok());
}

TEST(SafetensorsErrors, HeaderContents) {
  ScratchDir dir("st_header");
  const std::string p = dir.file("m.safetensors");
  struct Case {
    std::string header;
    size_t data;
    std::vector<const char*> mention;
  };
  const std::vector<Case> cases = {
      {"{not json", 8, {"not valid JSON"}},
      {"[1,2]", 8, {"not a JSON object"}},
      {R"({"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8, {"'x'", "unknown dtype 'F64'"}},
      {R"({"x":{"shape":[1],"data_offsets":[0,4]}})", 4, {"'x'", "dtype"}},
      {R"({"x":{"dtype":"F32","data_offsets":[0,4]}})", 4, {"'x'", "shape"}},
      {R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, {"'x'", "non-negative"}},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", 4, {"'x'", "data_offsets"}},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4, {"'x'", "begin <= end"}},
      {R"({"x":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16, {"'x'", "needs 16 bytes", "hold 12"}},
      {R"({"x":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", 8, {"'x'", "needs 6 bytes"}},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 10, {"'x'", "[8, 12]", "data size 10"}},
      {R"({"x":{"dtype":"U8","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})", 0, {"'x'", "overflows"}},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, {"'a'", "'b'", "overlap"}},
      {"\"just a string\"", 0, {"not a JSON object"}},
      {R"({"x":5})", 0, {"'x'", "not an object"}},
      // Two tensors of one name: the file is ambiguous (a JSON reader would keep the last).
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, {"duplicate key \"w\""}},
      // The same name spelled with an escape.
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"\u0077":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, {"duplicate key \"w\""}},
      // Nesting that would overflow a recursive parser's stack.
      {"{\"x\":" + std::string(200000, '[') + std::string(200000, ']') + "}", 0, {"nested deeper than 64"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    writeRawSafetensors(p, c.header, c.data);
    auto f = SafetensorsFile::open(p);
    ASSERT_FALSE(f.ok()) << "accepted";
    EXPECT_NE(f.error().message.find("m.safetensors"), std::string::npos) << f.error().message;
    for (const char* m : c.mention) EXPECT_NE(f.error().message.find(m), std::string::npos) << f.error().message;
  }
  // __metadata__ is ignored; zero-size tensors may share an offset; padding spaces are allowed.
  writeRawSafetensors(p,
                      R"({"__metadata__":{"format":"pt"},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                      R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}    )",
                      8);
  auto ok = SafetensorsFile::open(p);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ((*ok)->entries().size(), 2u);
}
