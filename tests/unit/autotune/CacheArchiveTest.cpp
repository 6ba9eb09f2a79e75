// `deepinfer-jit cache export FILE` / `cache import FILE`: kernel entries and tuning files travel
// in one archive; import checks every record and refuses corrupt or foreign ones with a message.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "deepinfer/BinaryCache.h"
#include "deepinfer/Specialize.h"
#include "deepinfer/TuningCache.h"

using namespace deepinfer;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / ("archive_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

struct CliRun {
  int rc;
  std::string out;
};

CliRun jit(const fs::path& cacheDir, const std::string& args, const fs::path& log) {
  const std::string cmd = fmt::format("env DEEPINFER_JIT_CACHE_DIR={} {}/deepinfer-jit {} > {} 2>&1",
                                      cacheDir.string(), DI_TOOLS_DIR, args, log.string());
  const int st = std::system(cmd.c_str());
  std::ifstream f(log);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, std::string((std::istreambuf_iterator<char>(f)), {})};
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

CompiledUnit unit(int tag) {
  CompiledUnit u;
  u.ptx = fmt::format("// ptx {}\n.version 8.0\n", tag);
  u.cubin = std::vector<uint8_t>(300, uint8_t(tag));
  u.log = "";
  u.options = {"--gpu-architecture=sm_80"};
  return u;
}

TuningMetadata md(const std::string& gpu) {
  TuningMetadata m;
  m.gpuName = gpu;
  m.computeCapability = 90;
  m.smCount = 132;
  m.driverVersion = "13.0";
  m.nvrtcVersion = "13.0";
  return m;
}

// A source cache with two kernel entries and the tuning files of two GPUs.
fs::path filledCache(const fs::path& root) {
  const fs::path dir = root / "src";
  auto c = BinaryCache::open(dir.string());
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE(c->store(std::string(64, 'a'), unit(1)).ok());
  EXPECT_TRUE(c->store(std::string(64, 'b'), unit(2)).ok());
  for (const char* gpu : {"NVIDIA H200", "NVIDIA A100-SXM4-80GB"}) {
    auto t = TuningCache::open(md(gpu), (dir / "tuning").string());
    EXPECT_TRUE(t.ok());
    CandidateTiming ct;
    ct.medianUs = ct.minUs = ct.p90Us = 12.5;
    ct.samples = 30;
    ct.checked = ct.checkOk = true;
    t->record({"local", "topk", "F32,I32", "N=2049..8192"}, "threads=256", ct);
    EXPECT_TRUE(t->save().ok());
  }
  return dir;
}

TEST(CacheArchive, ExportImportRoundTrips) {
  const fs::path root = scratch("rt");
  const fs::path src = filledCache(root), dst = root / "dst", arc = root / "cache.dia";
  CliRun e = jit(src, "cache export " + arc.string(), root / "export.log");
  ASSERT_EQ(e.rc, 0) << e.out;
  EXPECT_NE(e.out.find("exported 2 kernel entries and 2 tuning files"), std::string::npos) << e.out;
  CliRun i = jit(dst, "cache import " + arc.string(), root / "import.log");
  ASSERT_EQ(i.rc, 0) << i.out;
  EXPECT_NE(i.out.find("imported 2 kernel entries and 2 tuning files"), std::string::npos) << i.out;
  auto c = BinaryCache::open(dst.string());
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->list().size(), 2u);
  auto u = c->load(std::string(64, 'b'));
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->cubin, unit(2).cubin);
  for (const char* gpu : {"NVIDIA H200", "NVIDIA A100-SXM4-80GB"}) {
    const std::string name = md(gpu).hash() + ".json";
    EXPECT_EQ(slurp(dst / "tuning" / name), slurp(src / "tuning" / name)) << gpu;
    std::vector<std::string> warnings;
    auto t = TuningCache::open(md(gpu), (dst / "tuning").string(), &warnings);
    ASSERT_TRUE(t.ok());
    EXPECT_TRUE(warnings.empty());
    EXPECT_EQ(t->winner({"local", "topk", "F32,I32", "N=2049..8192"}).value_or(""), "threads=256");
  }
  // Importing again changes nothing and says so.
  CliRun again = jit(dst, "cache import " + arc.string(), root / "again.log");
  EXPECT_EQ(again.rc, 0) << again.out;
  EXPECT_NE(again.out.find("2 tuning files already identical"), std::string::npos) << again.out;
}

TEST(CacheArchive, CorruptRecordsAreRefused) {
  const fs::path root = scratch("corrupt");
  const fs::path src = filledCache(root), arc = root / "cache.dia";
  ASSERT_EQ(jit(src, "cache export " + arc.string(), root / "export.log").rc, 0);
  const std::string good = slurp(arc);

  // A flipped byte inside the first kernel entry's bytes: that record is refused, the others land.
  std::string flipped = good;
  const size_t rec = flipped.find("\nkernel ") + 1;
  const size_t body = flipped.find('\n', rec) + 1;
  flipped[body + 40] ^= 0x20;
  std::ofstream(root / "flipped.dia", std::ios::binary) << flipped;
  CliRun r = jit(root / "dst1", "cache import " + (root / "flipped.dia").string(), root / "flipped.log");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("fail the archive's SHA-256 (corrupt)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 refused"), std::string::npos) << r.out;
  auto c = BinaryCache::open((root / "dst1").string());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->list().size(), 1u);

  // Truncated: refused as truncated.
  std::ofstream(root / "short.dia", std::ios::binary) << good.substr(0, good.size() / 2);
  CliRun s = jit(root / "dst2", "cache import " + (root / "short.dia").string(), root / "short.log");
  EXPECT_EQ(s.rc, 1) << s.out;
  EXPECT_NE(s.out.find("truncated"), std::string::npos) << s.out;

  // Not an archive at all.
  std::ofstream(root / "junk.dia", std::ios::binary) << "PK\003\004 something else\n";
  CliRun j = jit(root / "dst3", "cache import " + (root / "junk.dia").string(), root / "junk.log");
  EXPECT_EQ(j.rc, 1) << j.out;
  EXPECT_NE(j.out.find("not a deepinfer-jit cache archive"), std::string::npos) << j.out;
}

// Records whose archive hash is right but whose contents are not ours: refused by content checks.
TEST(CacheArchive, ForeignRecordsAreRefused) {
  const fs::path root = scratch("foreign");
  auto rec = [](const std::string& kind, const std::string& name, const std::string& bytes) {
    return fmt::format("{} {} {} {}\n{}\n", kind, name, bytes.size(), sha256Hex(bytes), bytes);
  };
  const fs::path src = filledCache(root);
  const std::string h200 = md("NVIDIA H200").hash() + ".json";
  const std::string tuningText = slurp(src / "tuning" / h200);
  std::string arc = "DEEPINFER-JIT-CACHE-ARCHIVE-1\n";
  arc += rec("kernel", std::string(64, 'c'), "not a kernel entry");              // no entry header
  arc += rec("kernel", "../../etc/passwd", slurp(src / "kernels" / (std::string(64, 'a') + ".bin")));  // bad key
  arc += rec("tuning", "0123456789abcdef.json", tuningText);                     // named for another key
  arc += rec("tuning", h200, "{\"format\": \"deepinfer-jit-tuning-2\"}");        // no content hash
  arc += rec("plugin", "x", "y");                                                // unknown kind
  arc += "end 5\n";
  std::ofstream(root / "foreign.dia", std::ios::binary) << arc;
  CliRun r = jit(root / "dst", "cache import " + (root / "foreign.dia").string(), root / "foreign.log");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("has no valid header"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("is not a kernel cache key"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("is named for another key"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lacks its content or content hash"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown kind 'plugin'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5 refused"), std::string::npos) << r.out;
  auto c = BinaryCache::open((root / "dst").string());
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->list().empty());
  EXPECT_TRUE(TuningCache::listFiles((root / "dst" / "tuning").string()).empty());
  EXPECT_FALSE(fs::exists("/etc/passwd.bin"));
}

}  // namespace
