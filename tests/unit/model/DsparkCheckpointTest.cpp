// DSpark tensors in the checkpoint (docs/dspark.md §1): the tiny model's draft loads; a missing
// mtp.* tensor, a wrong shape or dtype is an error naming the tensor; a checkpoint without any
// mtp.* tensor runs without a draft; a config without DSpark ignores them.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>

#include "ModelTestFiles.h"
#include "model/CpuForward.h"
#include "model/MakeModel.h"
#include "model/Safetensors.h"

using namespace deepinfer;
using deepinfer::testing_util::failsWith;
using deepinfer::testing_util::ScratchDir;
namespace fs = std::filesystem;

namespace {

class DsparkCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("dspark_ckpt");
    MakeModelOptions o;
    o.preset = "tiny";
    o.outDir = dir_->path() + "/tiny";
    o.seed = 5;
    o.threads = 2;
    status_ = new Status(makeModel(o));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete status_;
  }
  void SetUp() override { ASSERT_TRUE(status_->ok()) << status_->error().message; }
  static std::string tiny() { return dir_->path() + "/tiny"; }

  // A copy of the tiny model whose tensors went through `edit` (and whose config.json through
  // `editConfig` when given).
  static std::string variant(const std::string& name,
                             const std::function<void(std::map<std::string, RawTensor>&)>& edit,
                             const std::function<void(ModelConfig&)>& editConfig = {}) {
    const std::string out = dir_->path() + "/" + name;
    fs::create_directories(out);
    for (const char* f : {"config.json", "token_map.i32", "engram_hash.json"})
      fs::copy_file(tiny() + "/" + f, out + "/" + f, fs::copy_options::overwrite_existing);
    if (editConfig) {
      auto cfg = loadModelConfig(tiny());
      EXPECT_TRUE(cfg.ok());
      editConfig(*cfg);
      testing_util::writeText(out + "/config.json", modelConfigToJson(*cfg));
    }
    auto file = SafetensorsFile::open(tiny() + "/model.safetensors");
    EXPECT_TRUE(file.ok());
    std::map<std::string, RawTensor> tensors;
    for (const SafetensorsEntry& e : (*file)->entries()) {
      const uint8_t* d = (*file)->data(e);
      tensors[e.name] = RawTensor{e.dtype, e.shape, std::vector<uint8_t>(d, d + e.byteSize())};
    }
    edit(tensors);
    EXPECT_TRUE(writeSafetensors(out + "/model.safetensors", tensors).ok());
    return out;
  }

  static inline ScratchDir* dir_ = nullptr;
  static inline Status* status_ = nullptr;
};

}  // namespace

TEST_F(DsparkCheckpoint, TinyDraftLoads) {
  auto m = CpuModel::load(tiny(), CpuModelOptions{1, false});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_TRUE((*m)->hasDraft());
  EXPECT_EQ((*m)->draftBlockSize(), 5);
  auto st = (*m)->newSpeculativeRequest();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(st->speculative());
  EXPECT_EQ(st->windowRingRows(), 16 + 5);
  EXPECT_EQ((*m)->newRequest().windowRingRows(), 16);
}

TEST_F(DsparkCheckpoint, MissingDraftTensorIsNamed) {
  const std::string d = variant("missing", [](auto& t) {
    t.erase("mtp.1.attn.wkv.weight");
    t.erase("mtp.1.attn.wkv.scale");
  });
  EXPECT_TRUE(failsWith(CpuModel::load(d, CpuModelOptions{1, false}), {"mtp.1.attn.wkv.weight", "not in the checkpoint"}));
  const std::string noScale = variant("noscale", [](auto& t) { t.erase("mtp.0.main_proj.scale"); });
  EXPECT_TRUE(failsWith(CpuModel::load(noScale, CpuModelOptions{1, false}), {"mtp.0.main_proj.weight", "mtp.0.main_proj.scale"}));
  const std::string noExpert = variant("noexpert", [](auto& t) {
    t.erase("mtp.2.ffn.experts.7.w3.weight");
    t.erase("mtp.2.ffn.experts.7.w3.scale");
  });
  EXPECT_TRUE(failsWith(CpuModel::load(noExpert, CpuModelOptions{1, false}), {"mtp.2.ffn.experts.7.w3.weight"}));
}

TEST_F(DsparkCheckpoint, WrongShapeOrDtypeIsNamed) {
  const std::string shape = variant("shape", [](auto& t) {
    RawTensor& r = t.at("mtp.2.markov_head.head.weight");
    r.shape = {1024, 8};
    r.bytes.resize(1024 * 8 * 2);
  });
  EXPECT_TRUE(failsWith(CpuModel::load(shape, CpuModelOptions{1, false}),
                        {"mtp.2.markov_head.head.weight", "shape [1024, 8]", "expected [1024, 16]"}));
  const std::string dtype = variant("dtype", [](auto& t) {
    RawTensor& r = t.at("mtp.2.confidence_head.proj.weight");
    r.dtype = "I32";
    r.shape = {1, 136};  // the same bytes as [1, 272] bf16
  });
  EXPECT_TRUE(failsWith(CpuModel::load(dtype, CpuModelOptions{1, false}), {"mtp.2.confidence_head.proj.weight"}));
  const std::string proj = variant("proj", [](auto& t) {
    RawTensor& r = t.at("mtp.0.main_proj.weight");
    r.shape = {256, 512};  // two taps' width instead of three
    r.bytes.resize(256 * 512);
    RawTensor& s = t.at("mtp.0.main_proj.scale");
    s.shape = {8, 16};
    s.bytes.resize(8 * 16);
  });
  EXPECT_TRUE(failsWith(CpuModel::load(proj, CpuModelOptions{1, false}), {"mtp.0.main_proj.weight", "expected [256, 768]"}));
}

TEST_F(DsparkCheckpoint, NoDraftTensorsMeansNoSpeculation) {
  const std::string d = variant("nodraft", [](auto& t) {
    for (auto it = t.begin(); it != t.end();) it = it->first.rfind("mtp.", 0) == 0 ? t.erase(it) : std::next(it);
  });
  auto m = CpuModel::load(d, CpuModelOptions{1, false});
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_FALSE((*m)->hasDraft());
  EXPECT_TRUE(failsWith((*m)->newSpeculativeRequest(), {"no mtp.*"}));
  // A config without DSpark ignores the tensors.
  const std::string off = variant("off", [](auto&) {}, [](ModelConfig& c) { c.dsparkBlockSize = 0; });
  auto m2 = CpuModel::load(off, CpuModelOptions{1, false});
  ASSERT_TRUE(m2.ok()) << m2.error().message;
  EXPECT_FALSE((*m2)->hasDraft());
  EXPECT_TRUE(failsWith((*m2)->newSpeculativeRequest(), {"no DSpark draft", "dspark_block_size 0"}));
}
