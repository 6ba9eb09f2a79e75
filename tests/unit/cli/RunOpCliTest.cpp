// `deepinfer-jit run-op --backend reference` round-trips a safetensors file for every op: the
// outputs it writes equal the reference run in-process, bit for bit; bad inputs are errors
// naming the tensor.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>

#include "cases/OpCases.h"
#include "deepinfer/OpSignature.h"
#include "deepinfer/Reference.h"
#include "model/Safetensors.h"

using namespace deepinfer;
namespace fs = std::filesystem;

namespace {

std::string attrFlags(const OpAttrs& a) {
  std::string s;
  for (const auto& [k, v] : a.all())
    s += v.isInt ? fmt::format(" --attr {}={}", k, v.i) : fmt::format(" --attr {}={:.17g}", k, v.f);
  return s;
}

int runJit(const std::string& args, const fs::path& log) {
  const std::string cmd = fmt::format("{}/deepinfer-jit {} > {} 2>&1", DI_TOOLS_DIR, args, log.string());
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class RunOpCli : public ::testing::TestWithParam<std::string> {};

TEST_P(RunOpCli, ReferenceBackendRoundTrips) {
  const std::string op = GetParam();
  const fs::path dir = fs::path(::testing::TempDir()) / ("run_op_" + op);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto cases = deepinfer::testing::casesFor(op, 20261129, /*large=*/false);
  ASSERT_FALSE(cases.empty());
  const auto& c = cases.front();
  ASSERT_TRUE(writeSafetensors((dir / "in.safetensors").string(), c.inputs).ok());
  const int rc = runJit(fmt::format("run-op --op {} --backend reference --in {} --out {}{}", op,
                                    (dir / "in.safetensors").string(), (dir / "out.safetensors").string(),
                                    attrFlags(c.attrs)),
                        dir / "log");
  ASSERT_EQ(rc, 0) << slurp(dir / "log");
  auto got = readSafetensorsToHost((dir / "out.safetensors").string());
  ASSERT_TRUE(got.ok()) << got.error().message;
  TensorMap want = c.inputs;
  ASSERT_TRUE(runReference(op, c.attrs, want).ok());
  for (const auto& o : findOpSignature(op)->outputs) {
    ASSERT_TRUE(got->count(o.name)) << "output '" << o.name << "' missing from the file";
    EXPECT_EQ(got->at(o.name).shape, want.at(o.name).shape) << o.name;
    EXPECT_EQ(got->at(o.name).dtype, want.at(o.name).dtype) << o.name;
    EXPECT_TRUE(got->at(o.name).bytes == want.at(o.name).bytes) << o.name << " differs from the in-process reference";
  }
  // A missing input is an error naming it.
  TensorMap missing = c.inputs;
  const std::string dropped = findOpSignature(op)->inputs.front().name;
  missing.erase(dropped);
  ASSERT_TRUE(writeSafetensors((dir / "missing.safetensors").string(), missing).ok());
  EXPECT_EQ(runJit(fmt::format("run-op --op {} --backend reference --in {} --out {}{}", op,
                               (dir / "missing.safetensors").string(), (dir / "x.safetensors").string(),
                               attrFlags(c.attrs)),
                   dir / "log2"),
            1);
  EXPECT_NE(slurp(dir / "log2").find("'" + dropped + "'"), std::string::npos) << slurp(dir / "log2");
  EXPECT_FALSE(fs::exists(dir / "x.safetensors"));
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(AllOps, RunOpCli,
                         ::testing::Values("kv_quant_insert", "gather_kcache", "combine_topk_swa",
                                           "sparse_mla_prefill", "sparse_mla_decode", "indexer_logits", "topk",
                                           "mhc_pre", "mhc_post", "mhc_fused_post_pre", "mhc_collapse",
                                           "weight_gemm", "moe_experts", "gather_kcache_combine"),
                         [](const auto& info) { return info.param; });

TEST(RunOpCli, VerifierRunsBeforeEitherBackend) {
  // mhc_collapse with C = 100 (not a multiple of 32): the dialect and the kernels reject it, so
  // the reference must not answer it either.
  const fs::path dir = fs::path(::testing::TempDir()) / "run_op_verifier";
  fs::remove_all(dir);
  fs::create_directories(dir);
  TensorMap in;
  in.emplace("x", HostTensor(DType::BF16, {3, 4, 100}));
  in.emplace("pre", HostTensor(DType::F32, {3, 4}));
  ASSERT_TRUE(writeSafetensors((dir / "in.safetensors").string(), in).ok());
  for (const char* backend : {"reference", "cuda"}) {
    SCOPED_TRACE(backend);
    const int rc = runJit(fmt::format("run-op --op mhc_collapse --backend {} --in {} --out {}", backend,
                                      (dir / "in.safetensors").string(), (dir / "out.safetensors").string()),
                          dir / "log");
    EXPECT_EQ(rc, 1) << slurp(dir / "log");
    EXPECT_NE(slurp(dir / "log").find("mhc_collapse: x"), std::string::npos) << slurp(dir / "log");
    EXPECT_NE(slurp(dir / "log").find("100"), std::string::npos) << slurp(dir / "log");
    EXPECT_FALSE(fs::exists(dir / "out.safetensors"));
  }
  fs::remove_all(dir);
}

TEST(RunOpCli, UsageErrors) {
  const fs::path dir = fs::path(::testing::TempDir());
  EXPECT_EQ(runJit("run-op --op topk", dir / "u1"), 2);
  EXPECT_NE(slurp(dir / "u1").find("--in is required"), std::string::npos);
  EXPECT_EQ(runJit("run-op --op topk --in a --out b --backend tpu", dir / "u2"), 2);
  EXPECT_EQ(runJit("run-op --op topk --in /nonexistent.safetensors --out b --backend reference", dir / "u3"), 1);
  EXPECT_NE(slurp(dir / "u3").find("/nonexistent.safetensors"), std::string::npos) << slurp(dir / "u3");
}

}  // namespace
