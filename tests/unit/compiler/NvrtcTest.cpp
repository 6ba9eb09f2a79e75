#include <gtest/gtest.h>

#include "deepinfer/EmbeddedTemplates.h"
#include "deepinfer/Nvrtc.h"

using namespace deepinfer;

TEST(Nvrtc, ParsesPtxasReport) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'di_x_1' for 'sm_80'\n"
      "ptxas info    : Function properties for di_x_1\n"
      "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 72 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'di_x_1_merge' for 'sm_80'\n"
      "ptxas info    : Function properties for di_x_1_merge\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 20 registers, used 0 barriers, 380 bytes cmem[0]\n";
  auto r = parsePtxasReport(log);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r["di_x_1"].registers, 72);
  EXPECT_EQ(r["di_x_1"].smemBytes, 4096);
  EXPECT_EQ(r["di_x_1"].spillStores, 8);
  EXPECT_EQ(r["di_x_1"].spillLoads, 4);
  EXPECT_EQ(r["di_x_1"].stackFrame, 16);
  EXPECT_EQ(r["di_x_1"].cmemBytes, 400);
  EXPECT_EQ(r["di_x_1_merge"].registers, 20);
  EXPECT_EQ(r["di_x_1_merge"].smemBytes, 0);
}

TEST(Nvrtc, CompilesWithEmbeddedHeadersAndReportsResources) {
  CudaUnit u;
  u.source =
      "#include \"common/Numerics.cuh\"\n"
      "extern \"C\" __global__ void di_test_k(const float* in, unsigned short* out) {\n"
      "  __shared__ float s[256];\n"
      "  s[threadIdx.x] = in[threadIdx.x];\n"
      "  __syncthreads();\n"
      "  out[threadIdx.x] = di::f32_to_bf16(s[255 - threadIdx.x]);\n"
      "}\n";
  u.entries = {"di_test_k"};
  for (int arch : {80, 86, 89, 90}) {
    auto c = compileUnit(u, "test.cu", arch, /*cubin=*/true);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_NE(c->ptx.find(".entry di_test_k"), std::string::npos);
    EXPECT_FALSE(c->cubin.empty());
    ASSERT_TRUE(c->resources.count("di_test_k")) << c->log;
    EXPECT_EQ(c->resources["di_test_k"].smemBytes, 1024);
    EXPECT_EQ(c->resources["di_test_k"].spillStores, 0);
  }
  auto ptxOnly = compileUnit(u, "test.cu", 86, /*cubin=*/false);
  ASSERT_TRUE(ptxOnly.ok()) << ptxOnly.error().message;
  EXPECT_TRUE(ptxOnly->cubin.empty());
  EXPECT_NE(ptxOnly->ptx.find(".target sm_86"), std::string::npos);
}

TEST(Nvrtc, ErrorsQuoteTheOffendingLine) {
  CudaUnit u;
  u.source = "extern \"C\" __global__ void k() {\n  int x = undefined_symbol_here;\n}\n";
  auto c = compileUnit(u, "bad.cu", 80, true);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("undefined_symbol_here"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("bad.cu:2"), std::string::npos) << c.error().message;
}

TEST(Nvrtc, TemplatesAreEmbedded) {
  bool numerics = false, mma = false;
  for (const auto& f : embeddedTemplates()) {
    numerics |= f.path == "common/Numerics.cuh";
    mma |= f.path == "common/Mma.cuh";
    EXPECT_FALSE(f.contents.empty()) << f.path;
  }
  EXPECT_TRUE(numerics);
  EXPECT_TRUE(mma);
}
