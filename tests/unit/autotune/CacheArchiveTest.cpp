// `deepinfer-jit cache export FILE` / `cache import FILE`: kernel entries and tuning files travel
// in one archive; import checks every record and refuses corrupt or foreign ones with a message.
// A kernel entry lands only if it is stored under its recorded source's key and that source,
// recompiled, gives exactly its PTX and cubin: an archive (or a file dropped into the cache) with
// a real key, altered PTX and a recomputed payload hash is refused by import and flagged by verify.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "deepinfer/BinaryCache.h"
#include "deepinfer/OpShapes.h"
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

// A real kernel of `op` (default config, sm_80 PTX), compiled through NVRTC, and its key.
struct RealKernel {
  std::string key;
  CompiledUnit unit;
};
RealKernel realKernel(const std::string& op) {
  auto d = makeOpDesc(op, {}, {});
  EXPECT_TRUE(d.ok());
  const TargetProfile t = *findTarget("sm_80");
  auto k = emitKernel(*d, findKernelFamily(op)->defaultConfig(*d, t));
  EXPECT_TRUE(k.ok());
  auto u = compileUnit(k->unit, k->baseName + ".cu", 80, /*cubin=*/false);
  EXPECT_TRUE(u.ok()) << u.error().message;
  return {unitContentKey(k->unit, 80, false), *u};
}
const RealKernel& kvInsert() {
  static const RealKernel k = realKernel("kv_quant_insert");
  return k;
}
const RealKernel& combine() {
  static const RealKernel k = realKernel("combine_topk_swa");
  return k;
}

// The entry bytes a cache writes for `u` under `key` (header, size, SHA-256, payload).
std::string entryBytes(const fs::path& scratchDir, const std::string& key, const CompiledUnit& u) {
  auto c = BinaryCache::open(scratchDir.string());
  EXPECT_TRUE(c.ok());
  EXPECT_TRUE(c->store(key, u).ok());
  return slurp(c->entryPath(key));
}

std::string record(const std::string& kind, const std::string& name, const std::string& bytes) {
  return fmt::format("{} {} {} {}\n{}\n", kind, name, bytes.size(), sha256Hex(bytes), bytes);
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
  EXPECT_TRUE(c->store(kvInsert().key, kvInsert().unit).ok());
  EXPECT_TRUE(c->store(combine().key, combine().unit).ok());
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
  auto u = c->load(combine().key);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->ptx, combine().unit.ptx);
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
  EXPECT_NE(again.out.find("imported 0 kernel entries and 0 tuning files"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("4 already present and identical"), std::string::npos) << again.out;
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
  auto rec = record;
  const fs::path src = filledCache(root);
  const std::string h200 = md("NVIDIA H200").hash() + ".json";
  const std::string tuningText = slurp(src / "tuning" / h200);
  std::string arc = "DEEPINFER-JIT-CACHE-ARCHIVE-1\n";
  arc += rec("kernel", std::string(64, 'c'), "not a kernel entry");              // no entry header
  arc += rec("kernel", "../../etc/passwd", slurp(src / "kernels" / (kvInsert().key + ".bin")));  // bad key
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

TEST(CacheArchive, PlantedKernelIsRefusedAndNothingIsOverwritten) {
  const fs::path root = scratch("planted");
  // A real key, PTX altered, the entry's payload hash and the archive's hash both recomputed.
  CompiledUnit planted = kvInsert().unit;
  planted.ptx += "\n// planted: a different kernel under the same key\n";
  const std::string bytes = entryBytes(root / "forge", kvInsert().key, planted);
  std::ofstream(root / "planted.dia", std::ios::binary)
      << "DEEPINFER-JIT-CACHE-ARCHIVE-1\n" + record("kernel", kvInsert().key, bytes) + "end 1\n";
  // The victim already holds the good entry.
  const fs::path dst = root / "dst";
  {
    auto c = BinaryCache::open(dst.string());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->store(kvInsert().key, kvInsert().unit).ok());
  }
  const std::string good = slurp(dst / "kernels" / (kvInsert().key + ".bin"));
  for (const char* flags : {"", " --replace"}) {
    SCOPED_TRACE(flags);
    CliRun r = jit(dst, "cache import " + (root / "planted.dia").string() + flags, root / "planted.log");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("holds PTX that is not what its recorded source compiles to (planted or altered)"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("1 refused"), std::string::npos) << r.out;
    EXPECT_EQ(slurp(dst / "kernels" / (kvInsert().key + ".bin")), good);
  }
  // Into an empty cache: nothing lands.
  CliRun e = jit(root / "empty", "cache import " + (root / "planted.dia").string(), root / "empty.log");
  EXPECT_EQ(e.rc, 1) << e.out;
  EXPECT_FALSE(fs::exists(root / "empty" / "kernels" / (kvInsert().key + ".bin")));

  // A real entry under another kernel's key: its key is not its source's.
  std::ofstream(root / "moved.dia", std::ios::binary)
      << "DEEPINFER-JIT-CACHE-ARCHIVE-1\n" +
             record("kernel", combine().key, entryBytes(root / "forge2", combine().key, kvInsert().unit)) + "end 1\n";
  CliRun m = jit(root / "empty", "cache import " + (root / "moved.dia").string(), root / "moved.log");
  EXPECT_EQ(m.rc, 1) << m.out;
  EXPECT_NE(m.out.find("is stored under a key that is not its recorded source's"), std::string::npos) << m.out;
}

TEST(CacheArchive, VerifyFlagsAnEntryPlantedOnDisk) {
  const fs::path root = scratch("verify_planted");
  const fs::path dir = root / "cache";
  CompiledUnit planted = combine().unit;
  planted.ptx += "\n// planted\n";
  {
    auto c = BinaryCache::open(dir.string());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->store(kvInsert().key, kvInsert().unit).ok());
    ASSERT_TRUE(c->store(combine().key, planted).ok());  // payload hash recomputed: header checks pass
  }
  CliRun quick = jit(dir, "cache verify --quick", root / "quick.log");
  EXPECT_EQ(quick.rc, 0) << quick.out;  // headers and hashes alone cannot see it
  CliRun v = jit(dir, "cache verify", root / "verify.log");
  EXPECT_EQ(v.rc, 1) << v.out;
  EXPECT_NE(v.out.find(combine().key), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("planted or altered"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("2 entries checked (each recompiled from its recorded source), 1 bad"), std::string::npos)
      << v.out;
  EXPECT_FALSE(fs::exists(dir / "kernels" / (combine().key + ".bin")));  // evicted
  EXPECT_TRUE(fs::exists(dir / "kernels" / (kvInsert().key + ".bin")));
}

TEST(CacheArchive, HostileSizesAndEndlessInputsAreMessages) {
  const fs::path root = scratch("hostile");
  // A record size of 2^64-1 must not wrap a bounds check; a size just over the limit is refused
  // before anything is read.
  for (const char* size : {"18446744073709551615", "999999999999", "-5", "12abc"}) {
    SCOPED_TRACE(size);
    std::ofstream(root / "big.dia", std::ios::binary)
        << fmt::format("DEEPINFER-JIT-CACHE-ARCHIVE-1\nkernel {} {} {}\nxx\nend 1\n", kvInsert().key, size,
                       std::string(64, '0'));
    CliRun r = jit(root / "dst", "cache import " + (root / "big.dia").string(), root / "big.log");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_TRUE(r.out.find("over the") != std::string::npos || r.out.find("malformed record header") != std::string::npos)
        << r.out;
  }
  CliRun z = jit(root / "dst", "cache import /dev/zero", root / "zero.log");
  EXPECT_EQ(z.rc, 1) << z.out;
  EXPECT_NE(z.out.find("not a deepinfer-jit cache archive"), std::string::npos) << z.out;
  // A header line that never ends.
  std::ofstream(root / "long.dia", std::ios::binary)
      << "DEEPINFER-JIT-CACHE-ARCHIVE-1\n" + std::string(100000, 'k');
  CliRun l = jit(root / "dst", "cache import " + (root / "long.dia").string(), root / "long.log");
  EXPECT_EQ(l.rc, 1) << l.out;
  EXPECT_NE(l.out.find("over-long record header"), std::string::npos) << l.out;
}

TEST(CacheVerbs, ReadOnlyVerbsCreateNothing) {
  const fs::path root = scratch("readonly");
  for (const char* verb : {"list", "verify", "clear", "export " }) {
    SCOPED_TRACE(verb);
    const std::string args = std::string("cache ") + verb + (std::string(verb) == "export " ? (root / "x.dia").string() : "") +
                             " --dir " + (root / "typo").string();
    CliRun r = jit(root / "env-cache", args, root / "ro.log");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(root / "typo"));
    EXPECT_FALSE(fs::exists(root / "env-cache"));
  }
}

TEST(CacheVerbs, SymlinkedCacheDirIsResolvedAndChecked) {
  const fs::path root = scratch("symlink");
  fs::create_directories(root / "real");
  fs::permissions(root / "real", fs::perms::owner_all, fs::perm_options::replace);
  fs::create_directory_symlink(root / "real", root / "link");
  auto c = BinaryCache::open((root / "link").string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->dir(), fs::canonical(root / "real").string());
  ASSERT_TRUE(c->store(kvInsert().key, kvInsert().unit).ok());
  EXPECT_TRUE(fs::exists(root / "real" / "kernels" / (kvInsert().key + ".bin")));
  CliRun r = jit(root / "link", "cache list", root / "list.log");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("kv_quant_insert {warps="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("compute_80 PTX"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fs::canonical(root / "real").string()), std::string::npos) << r.out;
  // A target others may write is refused as a plain directory would be.
  fs::permissions(root / "real", fs::perms::group_write, fs::perm_options::add);
  auto bad = BinaryCache::open((root / "link").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("the target of symlink"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("writable by group or others"), std::string::npos) << bad.error().message;
}

}  // namespace
