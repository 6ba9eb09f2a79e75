// Engram hashing constants and the n-gram hash (docs/model.md §8). The vectors were produced
// with numpy (default_rng / SeedSequence) and an independent Python port of the hash; the test
// needs neither.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "ModelTestFiles.h"
#include "model/EngramHash.h"
#include "model/MakeModelPresets.h"

using namespace deepinfer;
using deepinfer::testing_util::failsWith;
using deepinfer::testing_util::ScratchDir;

TEST(EngramNumpy, SeedSequenceState) {
  EXPECT_EQ(numpySeedSequenceState(0, 4), (std::vector<uint64_t>{15793235383387715774ULL, 12390638538380655177ULL,
                                                                  2361836109651742017ULL, 3188717715514472916ULL}));
  EXPECT_EQ(numpySeedSequenceState(1, 4), (std::vector<uint64_t>{7434755675892716031ULL, 10007452063617845036ULL,
                                                                  5266248848659119178ULL, 15045448681910192573ULL}));
  EXPECT_EQ(numpySeedSequenceState(10007, 4), (std::vector<uint64_t>{8634291315755388167ULL, 11042498673593962405ULL,
                                                                      15418481100450270793ULL, 9041516862649747678ULL}));
  // A seed wider than 32 bits enters as two entropy words.
  EXPECT_EQ(numpySeedSequenceState(4294967301ULL, 4),
            (std::vector<uint64_t>{17996766564426832300ULL, 12826844651305701079ULL, 10630945381835142969ULL,
                                   6839746111962626529ULL}));
}

TEST(EngramNumpy, IntegersInt64AllBoundedPaths) {
  // 32-bit Lemire path (small ranges, with a negative low), 64-bit path, and the widest range.
  EXPECT_EQ(numpyIntegersInt64(0, 0, 10, 6), (std::vector<int64_t>{8, 6, 5, 2, 3, 0}));
  EXPECT_EQ(numpyIntegersInt64(42, -5, 1000003, 5), (std::vector<int64_t>{89246, 773957, 654571, 438876, 433013}));
  EXPECT_EQ(numpyIntegersInt64(30021, 0, 3, 8), (std::vector<int64_t>{2, 0, 1, 2, 1, 0, 2, 2}));
  EXPECT_EQ(numpyIntegersInt64(7, 0, 4294967297LL, 4),
            (std::vector<int64_t>{2684764586LL, 3853503933LL, 3331544672LL, 967257516LL}));
  EXPECT_EQ(numpyIntegersInt64(4294967301ULL, 0, 1099511627779LL, 5),
            (std::vector<int64_t>{851246498596LL, 517565063624LL, 765128530147LL, 897792636123LL, 591467908562LL}));
  EXPECT_EQ(numpyIntegersInt64(123456789, 0, INT64_MAX, 4),
            (std::vector<int64_t>{255604904563013789LL, 8362831937566009189LL, 8129420665881559387LL,
                                  5763660056023947074LL}));
}

TEST(EngramPrimes, Primality) {
  EXPECT_FALSE(isPrime64(0));
  EXPECT_FALSE(isPrime64(1));
  EXPECT_TRUE(isPrime64(2));
  EXPECT_TRUE(isPrime64(16000057));
  EXPECT_FALSE(isPrime64(16000001));
  EXPECT_FALSE(isPrime64(3215031751ULL));           // strong pseudoprime to bases 2, 3, 5, 7
  EXPECT_TRUE(isPrime64(18446744073709551557ULL));  // largest 64-bit prime
  EXPECT_EQ(nextPrimeAbove(15999999), 16000057);
  EXPECT_EQ(nextPrimeAbove(1), 2);
  EXPECT_EQ(nextPrimeAbove(7), 11);
}

TEST(EngramHash, RealModelConstants) {
  const ModelConfig cfg = v41FlashDefaults();
  auto p = deriveEngramHash(cfg);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->primes.size(), 2u);
  EXPECT_EQ(p->lookupsPerToken(), 24);
  // Layer 1: primes start 16000057, 16000079, 16000081 and sum to 384,006,168.
  EXPECT_EQ(p->primes[0][0][0], 16000057);
  EXPECT_EQ(p->primes[0][0][1], 16000079);
  EXPECT_EQ(p->primes[0][0][2], 16000081);
  EXPECT_EQ(p->primes[0][1], (std::vector<int64_t>{16000189, 16000207, 16000211, 16000253, 16000277, 16000289,
                                                   16000307, 16000321}));
  EXPECT_EQ(p->tableRows[0], 384006168);
  // Layer 14: 16000477 .. 16000889, sum 384,016,682.
  EXPECT_EQ(p->primes[1][0][0], 16000477);
  EXPECT_EQ(p->primes[1][2][7], 16000889);
  EXPECT_EQ(p->tableRows[1], 384016682);
  EXPECT_EQ(p->multipliers[0],
            (std::vector<int64_t>{76632096046245LL, 4839876093313LL, 35959672319349LL, 73987337458391LL}));
  EXPECT_EQ(p->multipliers[1],
            (std::vector<int64_t>{67716810739261LL, 51510806800915LL, 30921347202721LL, 82619226485591LL}));
  // Offsets: exclusive prefix sums in (n-gram size, head) order.
  ASSERT_EQ(p->offsets[0].size(), 24u);
  EXPECT_EQ(p->offsets[0][0], 0);
  EXPECT_EQ(p->offsets[0][1], 16000057);
  EXPECT_EQ(p->offsets[0][8], std::accumulate(p->primes[0][0].begin(), p->primes[0][0].end(), int64_t(0)));
  EXPECT_EQ(p->offsets[0][23] + p->primes[0][2][7], 384006168);
  // All 48 primes distinct.
  std::set<int64_t> all;
  for (const auto& l : p->primes)
    for (const auto& n : l) all.insert(n.begin(), n.end());
  EXPECT_EQ(all.size(), 48u);
}

TEST(EngramHash, RowIdsMatchReference) {
  const ModelConfig cfg = v41FlashDefaults();
  auto p = deriveEngramHash(cfg);
  ASSERT_TRUE(p.ok());
  const std::vector<int64_t> classes = {5, 99091, 0, 12345, 777};
  const int64_t pad = 2;
  auto rows1 = engramRowIdsForSequence(*p, 0, classes, pad);
  auto rows14 = engramRowIdsForSequence(*p, 1, classes, pad);
  ASSERT_EQ(rows1.size(), 5u * 24);
  const std::vector<int64_t> l1t0 = {5412672,   18319159,  35492627,  60880252,  74962984,  95657733,
                                     98005115,  127351390, 143494632, 151789366, 171410756, 185435171,
                                     207165545, 218031260, 226330336, 247008214, 256353435, 276423911,
                                     295874085, 305599364, 322749888, 348475788, 367405771, 372009279};
  const std::vector<int64_t> l1t4 = {8192402,   26690386,  40008856,  50558610,  66391497,  87671455,
                                     98311850,  127339173, 135305395, 159207787, 169853592, 177649763,
                                     193547078, 209499594, 233433030, 246718353, 257123559, 284891200,
                                     293091910, 316284860, 322225154, 348853888, 352035352, 377270227};
  const std::vector<int64_t> l14t0 = {6939818,   27264717,  45254833,  51915000,  79245924,  86868470,
                                      108849060, 119840903, 131576092, 148509516, 175704205, 177570039,
                                      200101533, 208499118, 238497982, 243164617, 268363546, 274011563,
                                      290850399, 314068096, 324530373, 351836884, 354242998, 382274687};
  const std::vector<int64_t> l14t4 = {5447876,   31574733,  44351529,  53248265,  73810804,  90209802,
                                      97246719,  127067715, 134827647, 154615348, 169535978, 177621518,
                                      206517630, 213032266, 232633309, 240114140, 259814288, 275352821,
                                      297481955, 313370592, 334102842, 343691556, 352166498, 382659189};
  EXPECT_EQ(std::vector<int64_t>(rows1.begin(), rows1.begin() + 24), l1t0);
  EXPECT_EQ(std::vector<int64_t>(rows1.begin() + 96, rows1.end()), l1t4);
  EXPECT_EQ(std::vector<int64_t>(rows14.begin(), rows14.begin() + 24), l14t0);
  EXPECT_EQ(std::vector<int64_t>(rows14.begin() + 96, rows14.end()), l14t4);
  // The single-token form with an explicit window agrees (token 4: classes 777, 12345, 0, 99091).
  const int64_t window[4] = {777, 12345, 0, 99091};
  std::vector<int64_t> one(24, -1);
  engramRowIds(*p, 0, window, one.data());
  EXPECT_EQ(one, l1t4);
  // Every row id lies inside its head's slice of the table.
  for (size_t t = 0; t < classes.size(); ++t)
    for (int k = 0; k < 24; ++k) {
      const int64_t r = rows1[t * 24 + size_t(k)];
      const int64_t prime = p->primes[0][size_t(k / 8)][size_t(k % 8)];
      EXPECT_GE(r, p->offsets[0][size_t(k)]);
      EXPECT_LT(r, p->offsets[0][size_t(k)] + prime);
    }
}

TEST(EngramHash, JsonRoundTripAndErrors) {
  auto cfg = makeModelPresetConfig("tiny");
  ASSERT_TRUE(cfg.ok());
  auto p = deriveEngramHash(*cfg);
  ASSERT_TRUE(p.ok()) << p.error().message;
  // tiny: n-gram bounds 512/640/768, 4 heads; the second layer skips the first layer's primes.
  EXPECT_EQ(p->primes[0][0], (std::vector<int64_t>{521, 523, 541, 547}));
  EXPECT_EQ(p->primes[0][2], (std::vector<int64_t>{769, 773, 787, 797}));
  EXPECT_EQ(p->primes[1][0], (std::vector<int64_t>{557, 563, 569, 571}));
  const std::string json = engramHashToJson(*p);
  auto back = parseEngramHashJson(json, "engram_hash.json", *cfg);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->primes, p->primes);
  EXPECT_EQ(back->multipliers, p->multipliers);
  EXPECT_EQ(back->offsets, p->offsets);

  EXPECT_TRUE(failsWith(parseEngramHashJson("{", "h.json", *cfg), {"h.json", "invalid JSON"}));
  EXPECT_TRUE(failsWith(parseEngramHashJson(R"({"primes": [], "multipliers": []})", "h.json", *cfg),
                        {"h.json", "'primes'", "one entry per engram layer (2)"}));
  std::string notPrime = json;
  notPrime.replace(notPrime.find("521", notPrime.find("primes")), 3, "522");
  EXPECT_TRUE(failsWith(parseEngramHashJson(notPrime, "h.json", *cfg), {"primes[0][0][0]", "prime"}));
  std::string otherPrime = json;
  otherPrime.replace(otherPrime.find("521", otherPrime.find("primes")), 3, "509");
  EXPECT_TRUE(failsWith(parseEngramHashJson(otherPrime, "h.json", *cfg),
                        {"engram layer 1", "engram_num_embeddings[0]"}));
  std::string badMult = json;
  badMult.replace(badMult.find("\"multipliers\":[["), 16, "\"multipliers\":[[0,");
  EXPECT_TRUE(failsWith(parseEngramHashJson(badMult, "h.json", *cfg), {"multipliers[0]"}));
  EXPECT_TRUE(failsWith(parseEngramHashJson(R"({"layer_ids": [1, 5], "primes": [], "multipliers": []})", "h.json", *cfg),
                        {"layer_ids [1, 5]", "[1, 6]"}));

  // Deriving needs engram_vocab_size (the real config.json does not carry it).
  ModelConfig noBound = *cfg;
  noBound.engramVocabSize.clear();
  EXPECT_TRUE(failsWith(deriveEngramHash(noBound), {"engram_vocab_size"}));
  ModelConfig wrongRows = *cfg;
  wrongRows.engramNumEmbeddings[1] += 1;
  EXPECT_TRUE(failsWith(deriveEngramHash(wrongRows), {"engram layer 6", "engram_num_embeddings[1]"}));
}

TEST(EngramHash, LoadFromDirectoryAndTokenMap) {
  ScratchDir dir("engram_dir");
  auto cfg = makeModelPresetConfig("tiny");
  ASSERT_TRUE(cfg.ok());
  // No JSON: derived from the config.
  auto derived = loadEngramHash(dir.path(), *cfg);
  ASSERT_TRUE(derived.ok()) << derived.error().message;
  // A JSON in the directory wins (and is validated).
  testing_util::writeText(dir.file("engram_hash.json"), "{\"primes\": 1}");
  EXPECT_TRUE(failsWith(loadEngramHash(dir.path(), *cfg), {"engram_hash.json", "'primes'"}));
  testing_util::writeText(dir.file("engram_hash.json"), engramHashToJson(*derived));
  auto fromJson = loadEngramHash(dir.path(), *cfg);
  ASSERT_TRUE(fromJson.ok()) << fromJson.error().message;
  EXPECT_EQ(fromJson->multipliers, derived->multipliers);

  EXPECT_TRUE(failsWith(loadTokenMap(dir.path(), *cfg), {"token_map.i32", "missing"}));
  std::vector<uint8_t> bytes(size_t(cfg->vocabSize) * 4);
  for (int64_t v = 0; v < cfg->vocabSize; ++v) {
    const uint32_t c = uint32_t((v * 7) % cfg->engramCompressedVocabSize);
    for (int b = 0; b < 4; ++b) bytes[size_t(4 * v + b)] = uint8_t(c >> (8 * b));
  }
  testing_util::writeBytes(dir.file("token_map.i32"), bytes);
  auto map = loadTokenMap(dir.path(), *cfg);
  ASSERT_TRUE(map.ok()) << map.error().message;
  EXPECT_EQ((*map)[3], 21);
  EXPECT_EQ(engramPadClass(*map, *cfg), 14);  // token 2 -> class 14
  bytes[4 * 10 + 3] = 0x7F;  // token 10 -> a class far out of range
  testing_util::writeBytes(dir.file("token_map.i32"), bytes);
  EXPECT_TRUE(failsWith(loadTokenMap(dir.path(), *cfg), {"token 10", "outside [0, 800)"}));
  bytes.resize(bytes.size() - 4);
  testing_util::writeBytes(dir.file("token_map.i32"), bytes);
  EXPECT_TRUE(failsWith(loadTokenMap(dir.path(), *cfg), {"token_map.i32", "4092 bytes", "expected 4096"}));
}
