// What a model load checks beyond shapes: a tiny model in the release config.json layout loads
// and runs; quantization_config is checked against the stored tensors (a config that misdescribes
// them is refused, naming the field and a tensor that contradicts it); a NaN weight is refused
// naming the tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "ModelTestFiles.h"
#include "model/CpuForward.h"
#include "model/MakeModel.h"
#include "model/Safetensors.h"

using namespace deepinfer;
using deepinfer::testing_util::failsWith;
using deepinfer::testing_util::ScratchDir;

namespace {

class ModelLoadChecks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("release_tiny");
    MakeModelOptions o;
    o.preset = "tiny";
    o.outDir = dir_->path();
    o.seed = 3;
    o.threads = 2;
    status_ = new Status(makeModel(o));
    if (status_->ok()) original_ = new std::string(testing_util::readText(dir_->file("config.json")));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete status_;
    delete original_;
  }
  void SetUp() override { ASSERT_TRUE(status_->ok()) << status_->error().message; }
  void TearDown() override { testing_util::writeText(dir_->file("config.json"), *original_); }

  static const std::string& config() { return *original_; }
  // Writes config.json as make-model wrote it with `from` replaced by `to` (present once).
  static void writeEdited(const std::string& from, const std::string& to) {
    std::string text = config();
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    ASSERT_EQ(text.find(from, at + 1), std::string::npos) << from;
    text.replace(at, from.size(), to);
    testing_util::writeText(dir_->file("config.json"), text);
  }
  static Result<std::unique_ptr<CpuModel>> load() {
    CpuModelOptions o;
    o.threads = 2;
    return CpuModel::load(dir_->path(), o);
  }

  static inline ScratchDir* dir_ = nullptr;
  static inline Status* status_ = nullptr;
  static inline std::string* original_ = nullptr;
};

TEST_F(ModelLoadChecks, MakeModelWritesTheModelLoadChecksAndItRuns) {
  // Members print sorted and two-space indented: the top level comes before text_config.
  const size_t textConfig = config().find("\n  \"text_config\": {");
  ASSERT_NE(textConfig, std::string::npos) << config();
  const std::string top = config().substr(0, textConfig), inner = config().substr(textConfig);
  for (const char* want : {"\n  \"model_type\": \"deepseek_v41\",", "\"DeepseekV41ForCausalLM\"",
                           "\n  \"quantization_config\": {", "\"quant_method\": \"fp8\"",
                           "\"activation_scheme\": \"dynamic\"", "\"scale_fmt\": \"ue8m0\"", "\"expert_dtype\": \"fp4\"",
                           "\"weight_block_size\": [\n      32,\n      32\n    ]"})
    EXPECT_NE(top.find(want), std::string::npos) << want << "\n" << top;
  EXPECT_NE(inner.find("\"model_type\": \"deepseek_v41_text\""), std::string::npos);

  auto m = load();
  ASSERT_TRUE(m.ok()) << m.error().message;
  CpuRequestState req = (*m)->newRequest();
  auto logits = (*m)->prefill(req, {1, 2, 3, 4});
  ASSERT_TRUE(logits.ok()) << logits.error().message;
  EXPECT_EQ(logits->shape, (std::vector<int64_t>{4, (*m)->config().vocabSize}));
}

TEST_F(ModelLoadChecks, QuantizationConfigMustDescribeTheTensors) {
  struct Case {
    const char* from;
    const char* to;
    std::vector<const char*> mention;
  };
  const std::vector<Case> cases = {
      {"\"quant_method\": \"fp8\"", "\"quant_method\": \"int4\"", {"quant_method 'int4'"}},
      {"\"weight_block_size\": [\n      32,\n      32\n    ]", "\"weight_block_size\": [128, 128]",
       {"weight_block_size [128, 128] does not match the checkpoint", "layers.0.attn.wq_a.weight", "32x32"}},
      {"\"expert_dtype\": \"fp4\"", "\"expert_dtype\": \"fp8\"",
       {"expert_dtype 'fp8' does not match the checkpoint", "layers.0.ffn.experts.0.w1.weight", "fp4"}},
      {"\"model_type\": \"deepseek_v41\",", "\"model_type\": \"llama\",", {"model_type 'llama'"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    writeEdited(c.from, c.to);
    auto m = load();
    ASSERT_FALSE(m.ok()) << "accepted";
    EXPECT_NE(m.error().message.find("config.json"), std::string::npos) << m.error().message;
    for (const char* p : c.mention) EXPECT_NE(m.error().message.find(p), std::string::npos) << m.error().message;
  }
  // Without quantization_config the dtypes alone decide, as before.
  const size_t q = config().find("\"quantization_config\": {");
  writeEdited(config().substr(q, config().find("},", q) + 2 - q), "");
  auto m = load();
  EXPECT_TRUE(m.ok()) << m.error().message;
}

TEST_F(ModelLoadChecks, NaNWeightIsRefusedNamingTheTensor) {
  ScratchDir copy("nan_tiny");
  for (const auto& f : std::filesystem::directory_iterator(dir_->path()))
    std::filesystem::copy(f.path(), copy.file(f.path().filename().string()));
  const std::string st = copy.file("model.safetensors");
  const std::string name = "layers.3.attn.attn_sink";
  uint64_t at = 0;
  {
    auto file = SafetensorsFile::open(st);
    ASSERT_TRUE(file.ok()) << file.error().message;
    const SafetensorsEntry* e = (*file)->find(name);
    ASSERT_NE(e, nullptr);
    ASSERT_EQ(e->dtype, "F32");
    at = std::filesystem::file_size(st) - (*file)->dataSectionSize() + e->begin + 4 * 2;  // element 2
  }
  std::vector<uint8_t> bytes = testing_util::readBytes(st);
  const float nan = std::nanf("");
  std::memcpy(bytes.data() + at, &nan, 4);
  testing_util::writeBytes(st, bytes);
  CpuModelOptions o;
  o.threads = 2;
  EXPECT_TRUE(failsWith(CpuModel::load(copy.path(), o), {"'layers.3.attn.attn_sink'", "NaN", "[0, 2]"}));
}

}  // namespace
