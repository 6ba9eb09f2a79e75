// The binary cache cannot serve a torn, corrupt or foreign entry, publishes atomically, and lets
// two processes compiling one key produce one entry (docs/caches.md).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "deepinfer/BinaryCache.h"

using namespace deepinfer;
namespace fs = std::filesystem;

namespace {

fs::path freshDir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / ("bincache_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

CompiledUnit unit(const std::string& tag) {
  CompiledUnit u;
  u.ptx = "// ptx " + tag + "\n.version 8.0\n.entry di_k() { ret; }\n";
  u.cubin = std::vector<uint8_t>(1000, uint8_t(tag.size()));
  u.cubin[7] = 0;  // binary-safe
  u.log = "ptxas info    : Function properties for di_k\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes "
          "spill loads\nptxas info    : Used 32 registers, 1024 bytes smem, 360 bytes cmem[0]\n";
  u.options = {"--gpu-architecture=sm_80", "-std=c++17"};
  return u;
}

const std::string kKey = std::string(64, 'a');

TEST(BinaryCache, StoreThenLoadRoundTrips) {
  auto c = BinaryCache::open(freshDir("rt").string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c->load(kKey).has_value());
  ASSERT_TRUE(c->store(kKey, unit("x")).ok());
  auto u = c->load(kKey);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->ptx, unit("x").ptx);
  EXPECT_EQ(u->cubin, unit("x").cubin);
  EXPECT_EQ(u->options, unit("x").options);
  EXPECT_EQ(u->resources["di_k"].registers, 32);
  struct stat st;
  ASSERT_EQ(::stat(c->dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(BinaryCache, CorruptEntryIsEvictedAndRebuilt) {
  auto c = BinaryCache::open(freshDir("corrupt").string());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->store(kKey, unit("x")).ok());
  {  // flip one payload byte
    std::fstream f(c->entryPath(kKey), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('#');
  }
  std::string warning;
  EXPECT_FALSE(c->load(kKey, &warning).has_value());
  EXPECT_NE(warning.find("content hash"), std::string::npos) << warning;
  EXPECT_FALSE(fs::exists(c->entryPath(kKey)));  // evicted
  int compiles = 0;
  bool compiled = false;
  auto u = c->getOrCompile(kKey, "k", [&]() -> Result<CompiledUnit> { ++compiles; return unit("y"); }, false, &compiled);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(compiles, 1);
  EXPECT_TRUE(compiled);
  EXPECT_TRUE(c->load(kKey).has_value());
  // A truncated entry is a miss too.
  fs::resize_file(c->entryPath(kKey), fs::file_size(c->entryPath(kKey)) / 2);
  warning.clear();
  EXPECT_FALSE(c->load(kKey, &warning).has_value());
  EXPECT_NE(warning.find("torn"), std::string::npos) << warning;
}

// A writer killed mid-write leaves nothing that loads: staging happens away from the entry path.
TEST(BinaryCache, KilledWriterLeavesNoEntry) {
  const std::string dir = freshDir("killed").string();
  ASSERT_TRUE(BinaryCache::open(dir).ok());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto c = BinaryCache::open(dir);
    CompiledUnit big = unit("big");
    big.cubin.assign(size_t(1) << 30, 7);  // 1 GiB: the parent kills us while we write it
    (void)c->store(kKey, big);
    ::_exit(0);
  }
  // Wait until the staged file exists and is growing, then kill -9.
  bool staged = false;
  for (int i = 0; i < 2000 && !staged; ++i) {
    for (const auto& e : fs::directory_iterator(fs::path(dir) / "staging"))
      staged |= fs::file_size(e.path()) > 0;
    if (!staged) ::usleep(1000);
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  auto c = BinaryCache::open(dir);  // also removes the dead writer's staged file
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(fs::exists(c->entryPath(kKey)));
  EXPECT_FALSE(c->load(kKey).has_value());
  EXPECT_TRUE(fs::is_empty(fs::path(dir) / "staging"));
  fs::remove_all(dir);
}

// Two processes asking for one key: one compiles, the other waits on the lock and loads.
TEST(BinaryCache, ConcurrentCompilesProduceOneEntry) {
  const std::string dir = freshDir("concurrent").string();
  ASSERT_TRUE(BinaryCache::open(dir).ok());
  const std::string counter = dir + "/compiles.txt";
  pid_t kids[2];
  for (pid_t& k : kids) {
    k = ::fork();
    ASSERT_GE(k, 0);
    if (k == 0) {
      auto c = BinaryCache::open(dir);
      auto u = c->getOrCompile(kKey, "k", [&]() -> Result<CompiledUnit> {
        std::ofstream(counter, std::ios::app) << "x";
        ::usleep(300000);  // long enough for the other process to hit the lock
        return unit("z");
      }, false);
      ::_exit(u.ok() && u->ptx == unit("z").ptx ? 0 : 1);
    }
  }
  for (pid_t k : kids) {
    int status = 0;
    ::waitpid(k, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::ifstream f(counter);
  std::string s((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(s, "x");  // compiled exactly once
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "kernels")) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1u);
}

TEST(BinaryCache, RequireHitFailsFastOnAMiss) {
  auto c = BinaryCache::open(freshDir("require").string());
  ASSERT_TRUE(c.ok());
  bool called = false;
  auto u = c->getOrCompile(kKey, "di_topk_0123 for sm_90", [&]() -> Result<CompiledUnit> { called = true; return unit("q"); },
                           /*requireHit=*/true);
  ASSERT_FALSE(u.ok());
  EXPECT_FALSE(called);
  EXPECT_NE(u.error().message.find("cache miss for di_topk_0123 for sm_90"), std::string::npos) << u.error().message;
  EXPECT_NE(u.error().message.find("require"), std::string::npos);
  ASSERT_TRUE(c->store(kKey, unit("q")).ok());
  EXPECT_TRUE(c->getOrCompile(kKey, "k", [&]() -> Result<CompiledUnit> { return Error{"no"}; }, true).ok());
}

TEST(BinaryCache, RefusesForeignOrWritableDirectoriesAndEntries) {
  const fs::path d = freshDir("perm");
  ASSERT_TRUE(BinaryCache::open(d.string()).ok());
  fs::permissions(d, fs::perms::group_write, fs::perm_options::add);
  auto c = BinaryCache::open(d.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("writable by group or others"), std::string::npos) << c.error().message;
  fs::permissions(d, fs::perms::group_write, fs::perm_options::remove);
  c = BinaryCache::open(d.string());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->store(kKey, unit("x")).ok());
  fs::permissions(c->entryPath(kKey), fs::perms::others_write, fs::perm_options::add);
  std::string warning;
  EXPECT_FALSE(c->load(kKey, &warning).has_value());
  EXPECT_NE(warning.find("refusing"), std::string::npos) << warning;
  EXPECT_TRUE(fs::exists(c->entryPath(kKey)));  // not ours to trust, so not ours to delete either
}

TEST(BinaryCache, DirectoryFromEnvironment) {
  const char* old = std::getenv("DEEPINFER_JIT_CACHE_DIR");
  const std::string saved = old ? old : "";
  ::setenv("DEEPINFER_JIT_CACHE_DIR", "/some/where", 1);
  EXPECT_EQ(BinaryCache::defaultDir(), "/some/where");
  ::unsetenv("DEEPINFER_JIT_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(BinaryCache::defaultDir(), "/xdg/deepinfer-jit");
  ::unsetenv("XDG_CACHE_HOME");
  if (old) ::setenv("DEEPINFER_JIT_CACHE_DIR", saved.c_str(), 1);
  ::setenv("DEEPINFER_JIT_REQUIRE_CACHE_HIT", "0", 1);
  EXPECT_FALSE(BinaryCache::requireHitFromEnv());
  ::setenv("DEEPINFER_JIT_REQUIRE_CACHE_HIT", "1", 1);
  EXPECT_TRUE(BinaryCache::requireHitFromEnv());
  ::unsetenv("DEEPINFER_JIT_REQUIRE_CACHE_HIT");
}

}  // namespace
