// The tuning cache keeps per-config timings keyed by GPU + software metadata and shape bucket,
// ignores (and never overwrites) a file of another key, heals unknown fields on save, survives a
// corrupt file, and applies hysteresis (docs/caches.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "deepinfer/TuningCache.h"

using namespace deepinfer;
namespace fs = std::filesystem;

namespace {

fs::path freshDir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / ("tuning_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TuningMetadata h200() {
  TuningMetadata m;
  m.gpuName = "NVIDIA H200";
  m.computeCapability = 90;
  m.smCount = 132;
  m.driverVersion = "13.0";
  m.nvrtcVersion = "13.0";
  return m;
}

const TuningKey kKey{"local", "sparse_mla_decode", "BF16,U8,I32", "B=5..8", "H=64,Sq=1,swa_k=128,extra_k=512,swa_bs=64,extra_bs=64"};

CandidateTiming timed(double us) {
  CandidateTiming t;
  t.medianUs = t.minUs = t.p90Us = us;
  t.samples = 30;
  t.checked = t.checkOk = true;
  t.measuredAt = "2026-11-29T00:00:00Z";
  return t;
}

std::string readFile(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

void writeFile(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

// A file whose content JSON is given verbatim, sealed with the right hash.
std::string sealed(const std::string& content, const std::string& format = "deepinfer-jit-tuning-2") {
  auto h = TuningCache::contentHash(content);
  EXPECT_TRUE(h.ok());
  return "{\"format\": \"" + format + "\", \"content_sha256\": \"" + *h + "\", \"content\": " + content + "}";
}

std::string metadataJson(const TuningMetadata& m, const std::string& extra = "") {
  std::ostringstream s;
  s << "{\"gpu\": \"" << m.gpuName << "\", \"compute_capability\": " << m.computeCapability
    << ", \"sm_count\": " << m.smCount << ", \"driver\": \"" << m.driverVersion << "\", \"nvrtc\": \""
    << m.nvrtcVersion << "\", \"generator\": " << m.generatorVersion << extra << "}";
  return s.str();
}

TEST(TuningCache, SaveAndReopenRoundTrips) {
  const fs::path dir = freshDir("rt");
  auto c = TuningCache::open(h200(), dir.string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  c->setDefault(kKey, "heads_per_cta=16");
  c->record(kKey, "heads_per_cta=16", timed(10.0));
  CandidateTiming bad = timed(1.0);
  bad.checkOk = false;
  bad.error = "out: max error 3";
  c->record(kKey, "heads_per_cta=8", bad);
  c->setRoofline({3792, 642, "2026-11-29T00:00:00Z"});
  ASSERT_TRUE(c->save().ok());
  EXPECT_EQ(fs::path(c->path()).filename().string(), h200().hash() + ".json");

  std::vector<std::string> warnings;
  auto r = TuningCache::open(h200(), dir.string(), &warnings);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  ASSERT_NE(r->find(kKey), nullptr);
  EXPECT_EQ(r->find(kKey)->defaultConfig, "heads_per_cta=16");
  EXPECT_EQ(r->winner(kKey).value_or(""), "heads_per_cta=16");  // the failed check never wins
  EXPECT_EQ(r->find(kKey)->timings.size(), 2u);
  EXPECT_EQ(r->find(kKey)->timings.at("heads_per_cta=8").error, "out: max error 3");
  EXPECT_DOUBLE_EQ(r->roofline().copyGBs, 3792);
  EXPECT_EQ(r->serialize(), c->serialize());
}

TEST(TuningCache, KeyFieldsEachChangeTheFile) {
  const std::string base = h200().hash();
  auto variants = std::vector<TuningMetadata>(6, h200());
  variants[0].gpuName = "NVIDIA A100-SXM4-80GB";
  variants[1].computeCapability = 80;
  variants[2].smCount = 108;
  variants[3].driverVersion = "12.8";
  variants[4].nvrtcVersion = "12.9";
  variants[5].generatorVersion = kGeneratorVersion + 1;
  for (const auto& v : variants) {
    EXPECT_NE(v.hash(), base) << v.describe();
    EXPECT_EQ(v.differences(h200()).size(), 1u) << v.describe();
  }
  TuningKey other = kKey;
  other.target = "sm_80";  // the sm_80 PTX tuned on this GPU is its own entry
  EXPECT_NE(other.str(), kKey.str());
}

TEST(TuningCache, MismatchedFileIsIgnoredAndNeverOverwritten) {
  const fs::path dir = freshDir("mismatch");
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
  TuningMetadata a100 = h200();
  a100.gpuName = "NVIDIA A100-SXM4-80GB";
  a100.computeCapability = 80;
  const std::string foreign = sealed("{\"metadata\": " + metadataJson(a100) +
                                     ", \"entries\": [{\"target\": \"local\", \"op\": \"topk\", \"dtypes\": \"F32,I32\", "
                                     "\"bucket\": \"N=2049..8192\", \"dims\": \"k=512\", \"default\": \"\", \"winner\": \"\", \"timings\": {}}]}");
  // Planted under this GPU's file name (a copied cache, a stale generator): a definite mismatch.
  const std::string ours = (dir / (h200().hash() + ".json")).string();
  writeFile(ours, foreign);
  std::vector<std::string> warnings;
  auto c = TuningCache::open(h200(), dir.string(), &warnings);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->foreignFile());
  EXPECT_TRUE(c->entries().empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("NVIDIA A100"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("never overwritten"), std::string::npos) << warnings[0];
  c->record(kKey, "heads_per_cta=16", timed(10));
  EXPECT_FALSE(c->save().ok());
  EXPECT_EQ(readFile(ours), foreign);

  // Another format (newer, or the older one without the model dims in the key) is a definite
  // mismatch too.
  for (const char* other : {"deepinfer-jit-tuning-1", "deepinfer-jit-tuning-3"}) {
    SCOPED_TRACE(other);
    const std::string text = sealed("{\"metadata\": " + metadataJson(h200()) + ", \"entries\": []}", other);
    writeFile(ours, text);
    auto o = TuningCache::open(h200(), dir.string());
    ASSERT_TRUE(o.ok());
    EXPECT_TRUE(o->foreignFile());
    EXPECT_FALSE(o->save().ok());
    EXPECT_EQ(readFile(ours), text);
  }
  const std::string newer = sealed("{\"metadata\": " + metadataJson(h200()) + ", \"entries\": []}",
                                   "deepinfer-jit-tuning-7");
  writeFile(ours, newer);
  auto n = TuningCache::open(h200(), dir.string());
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->foreignFile());
  EXPECT_FALSE(n->save().ok());
  EXPECT_EQ(readFile(ours), newer);

  // Another GPU's own file (its own name) is untouched by this GPU's save.
  const std::string theirs = (dir / (a100.hash() + ".json")).string();
  writeFile(theirs, foreign);
  fs::remove(ours);
  auto mine = TuningCache::open(h200(), dir.string());
  ASSERT_TRUE(mine.ok());
  EXPECT_FALSE(mine->foreignFile());
  mine->record(kKey, "heads_per_cta=16", timed(10));
  ASSERT_TRUE(mine->save().ok());
  EXPECT_EQ(readFile(theirs), foreign);
}

TEST(TuningCache, UnknownFieldsAreIgnoredAndDroppedOnSave) {
  const fs::path dir = freshDir("unknown");
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
  const std::string content =
      "{\"metadata\": " + metadataJson(h200(), ", \"future_field\": 5") +
      ", \"from_the_future\": [1, 2], \"entries\": [{\"target\": \"local\", \"op\": \"sparse_mla_decode\", "
      "\"dtypes\": \"BF16,U8,I32\", \"bucket\": \"B=5..8\", \"dims\": \"H=64,Sq=1,swa_k=128,extra_k=512,swa_bs=64,extra_bs=64\", \"default\": \"heads_per_cta=16\", \"winner\": "
      "\"heads_per_cta=16\", \"note\": \"x\", \"timings\": {\"heads_per_cta=16\": {\"median_us\": 10, \"min_us\": 9, "
      "\"p90_us\": 11, \"samples\": 30, \"checked\": true, \"check_ok\": true, \"power_w\": 400}}}]}";
  const std::string path = (dir / (h200().hash() + ".json")).string();
  writeFile(path, sealed(content));
  std::vector<std::string> warnings;
  auto c = TuningCache::open(h200(), dir.string(), &warnings);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  EXPECT_FALSE(c->foreignFile());
  EXPECT_EQ(c->winner(kKey).value_or(""), "heads_per_cta=16");
  EXPECT_DOUBLE_EQ(c->find(kKey)->timings.at("heads_per_cta=16").minUs, 9);
  ASSERT_TRUE(c->save().ok());
  const std::string healed = readFile(path);
  for (const char* f : {"future_field", "from_the_future", "\"note\"", "power_w"})
    EXPECT_EQ(healed.find(f), std::string::npos) << f << " survived the save:\n" << healed;
  auto again = TuningCache::open(h200(), dir.string(), &warnings);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(again->winner(kKey).value_or(""), "heads_per_cta=16");
}

TEST(TuningCache, CorruptFileWarnsAndStartsEmpty) {
  const fs::path dir = freshDir("corrupt");
  auto c = TuningCache::open(h200(), dir.string());
  ASSERT_TRUE(c.ok());
  c->record(kKey, "heads_per_cta=16", timed(10));
  ASSERT_TRUE(c->save().ok());
  const std::string good = readFile(c->path());

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"truncated", good.substr(0, good.size() / 2)},
      {"bit flip", [&] {
         std::string s = good;
         s[s.find("\"median_us\"") + 14] ^= 1;  // "10" -> "11": valid JSON, the hash fails
         return s;
       }()},
      {"not json", "garbage\x01"},
      {"no metadata", sealed("{\"entries\": []}")},
  };
  for (const auto& [what, text] : bad) {
    writeFile(c->path(), text);
    std::vector<std::string> warnings;
    auto r = TuningCache::open(h200(), dir.string(), &warnings);
    ASSERT_TRUE(r.ok()) << what;
    EXPECT_TRUE(r->entries().empty()) << what;
    EXPECT_FALSE(r->foreignFile()) << what;
    ASSERT_EQ(warnings.size(), 1u) << what;
    EXPECT_NE(warnings[0].find(c->path()), std::string::npos) << warnings[0];
    // A corrupt file of ours is replaced by the next save.
    r->record(kKey, "heads_per_cta=8", timed(5));
    ASSERT_TRUE(r->save().ok()) << what;
    std::vector<std::string> w2;
    auto healed = TuningCache::open(h200(), dir.string(), &w2);
    ASSERT_TRUE(healed.ok());
    EXPECT_TRUE(w2.empty()) << what;
    EXPECT_EQ(healed->winner(kKey).value_or(""), "heads_per_cta=8") << what;
  }
}

TEST(TuningCache, HysteresisKeepsIncumbentWithinMargin) {
  auto c = TuningCache::open(h200(), freshDir("hyst").string());
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->margin(), 0.03);
  EXPECT_TRUE(c->record(kKey, "a=1", timed(100.0)));
  EXPECT_EQ(c->winner(kKey).value_or(""), "a=1");
  // 2% faster: within the 3% margin, the incumbent stays.
  EXPECT_FALSE(c->record(kKey, "a=2", timed(98.0)));
  EXPECT_EQ(c->winner(kKey).value_or(""), "a=1");
  // Exactly at the margin is not beyond it.
  EXPECT_FALSE(c->record(kKey, "a=3", timed(97.0)));
  EXPECT_EQ(c->winner(kKey).value_or(""), "a=1");
  // 5% faster: replaces it.
  EXPECT_TRUE(c->record(kKey, "a=4", timed(95.0)));
  EXPECT_EQ(c->winner(kKey).value_or(""), "a=4");
  // A faster candidate that failed its reference check never wins.
  CandidateTiming wrong = timed(10.0);
  wrong.checkOk = false;
  EXPECT_FALSE(c->record(kKey, "a=5", wrong));
  CandidateTiming unchecked = timed(10.0);
  unchecked.checked = false;
  EXPECT_FALSE(c->record(kKey, "a=6", unchecked));
  EXPECT_EQ(c->winner(kKey).value_or(""), "a=4");
  // A wider margin is an option.
  c->setMargin(0.10);
  EXPECT_FALSE(c->record(kKey, "a=7", timed(90.0)));  // 5.3% faster than 95: kept
  EXPECT_EQ(c->winner(kKey).value_or(""), "a=4");
  EXPECT_TRUE(c->record(kKey, "a=8", timed(80.0)));
  EXPECT_EQ(c->winner(kKey).value_or(""), "a=8");
  // Re-timing the winner badly hands over to the best recorded candidate beyond the margin.
  EXPECT_TRUE(c->record(kKey, "a=8", timed(120.0)));
  EXPECT_EQ(c->winner(kKey).value_or(""), "a=7");
}

TEST(TuningCache, NewCandidateIsTimedAloneAndOldTimingsKept) {
  const fs::path dir = freshDir("newcand");
  auto c = TuningCache::open(h200(), dir.string());
  ASSERT_TRUE(c.ok());
  const std::vector<std::string> first = {"a=1", "a=2", "a=3"};
  EXPECT_EQ(c->untimed(kKey, first), first);
  c->record(kKey, "a=1", timed(30));
  c->record(kKey, "a=2", timed(20));
  CandidateTiming err;
  err.error = "launch failed";
  c->record(kKey, "a=3", err);  // errors are recorded too: not retried on every run
  ASSERT_TRUE(c->save().ok());
  auto r = TuningCache::open(h200(), dir.string());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->untimed(kKey, first).empty());
  const std::vector<std::string> grown = {"a=1", "a=2", "a=3", "a=4"};
  EXPECT_EQ(r->untimed(kKey, grown), std::vector<std::string>{"a=4"});
  r->record(kKey, "a=4", timed(10));
  EXPECT_EQ(r->winner(kKey).value_or(""), "a=4");
  EXPECT_DOUBLE_EQ(r->find(kKey)->timings.at("a=1").medianUs, 30);
  EXPECT_DOUBLE_EQ(r->find(kKey)->timings.at("a=2").medianUs, 20);
  // Other buckets are separate entries.
  TuningKey other = kKey;
  other.bucket = "B=9..16";
  EXPECT_EQ(r->untimed(other, first), first);
}

TEST(TuningCache, ParseConfigStringRoundTrips) {
  auto c = parseConfigString("heads_per_cta=16,splits=4");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->at("heads_per_cta"), 16);
  EXPECT_EQ(c->at("splits"), 4);
  EXPECT_TRUE(parseConfigString("").has_value());
  EXPECT_FALSE(parseConfigString("a=").has_value());
  EXPECT_FALSE(parseConfigString("a=x").has_value());
  EXPECT_FALSE(parseConfigString("=3").has_value());
}

}  // namespace
