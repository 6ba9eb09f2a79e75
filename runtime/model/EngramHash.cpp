// Engram hashing constants (docs/model.md §8) and a bit-exact port of the numpy pieces behind
// them: SeedSequence entropy mixing, the PCG64 generator (XSL-RR 128/64) and
// Generator.integers' bounded sampling (Lemire's nearly-divisionless method, numpy's
// random_bounded_uint64_fill with use_masked = false).
#include "EngramHash.h"

#include <fmt/format.h>

#include <fstream>
#include <set>
#include <sstream>

#include "deepinfer/InputFiles.h"
#include "deepinfer/JsonInput.h"
#include "llvm/Support/JSON.h"

namespace deepinfer {
namespace {

namespace json = llvm::json;
using u128 = unsigned __int128;

// --- SeedSequence (numpy/random/bit_generator.pyx) ---
constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875;
constexpr uint32_t kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
constexpr uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr int kXShift = 16;
constexpr size_t kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t& hashConst) {
  value ^= hashConst;
  hashConst *= kMultA;
  value *= hashConst;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  r ^= r >> kXShift;
  return r;
}

// An integer seed as numpy coerces it: 32-bit words, least significant first; 0 -> [0].
std::vector<uint32_t> seedWords(uint64_t seed) {
  std::vector<uint32_t> w;
  do {
    w.push_back(uint32_t(seed));
    seed >>= 32;
  } while (seed);
  return w;
}

// --- PCG64 (numpy/random/src/pcg64) ---
constexpr u128 kPcgMult = (u128(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;

class Pcg64 {
 public:
  Pcg64(u128 initState, u128 initSeq) {
    inc_ = (initSeq << 1) | 1;
    state_ = 0;
    step();
    state_ += initState;
    step();
  }
  uint64_t next64() {
    step();
    const uint64_t x = uint64_t(state_ >> 64) ^ uint64_t(state_);
    const unsigned rot = unsigned(state_ >> 122);
    return (x >> rot) | (x << ((64 - rot) & 63));
  }
  // Two 32-bit outputs per 64-bit draw, low half first (pcg64_next32).
  uint32_t next32() {
    if (hasHalf_) {
      hasHalf_ = false;
      return half_;
    }
    const uint64_t v = next64();
    hasHalf_ = true;
    half_ = uint32_t(v >> 32);
    return uint32_t(v);
  }

 private:
  void step() { state_ = state_ * kPcgMult + inc_; }
  u128 state_ = 0, inc_ = 0;
  bool hasHalf_ = false;
  uint32_t half_ = 0;
};

Pcg64 defaultRng(uint64_t seed) {
  const std::vector<uint64_t> s = numpySeedSequenceState(seed, 4);
  // pcg64_set_seed: state from words 0 (high) and 1 (low), increment from words 2, 3.
  return Pcg64((u128(s[0]) << 64) | s[1], (u128(s[2]) << 64) | s[3]);
}

uint64_t boundedLemire64(Pcg64& g, uint64_t rng) {
  const uint64_t rngExcl = rng + 1;
  u128 m = u128(g.next64()) * rngExcl;
  uint64_t leftover = uint64_t(m);
  if (leftover < rngExcl) {
    const uint64_t threshold = (UINT64_MAX - rng) % rngExcl;
    while (leftover < threshold) {
      m = u128(g.next64()) * rngExcl;
      leftover = uint64_t(m);
    }
  }
  return uint64_t(m >> 64);
}

uint32_t boundedLemire32(Pcg64& g, uint32_t rng) {
  const uint32_t rngExcl = rng + 1;
  uint64_t m = uint64_t(g.next32()) * rngExcl;
  uint32_t leftover = uint32_t(m);
  if (leftover < rngExcl) {
    const uint32_t threshold = (UINT32_MAX - rng) % rngExcl;
    while (leftover < threshold) {
      m = uint64_t(g.next32()) * rngExcl;
      leftover = uint32_t(m);
    }
  }
  return uint32_t(m >> 32);
}

uint64_t mulMod(uint64_t a, uint64_t b, uint64_t m) { return uint64_t(u128(a) * b % m); }

uint64_t powMod(uint64_t a, uint64_t e, uint64_t m) {
  uint64_t r = 1;
  a %= m;
  while (e) {
    if (e & 1) r = mulMod(r, a, m);
    a = mulMod(a, a, m);
    e >>= 1;
  }
  return r;
}

void computeOffsets(EngramHashParams& p) {
  p.offsets.assign(p.primes.size(), {});
  p.tableRows.assign(p.primes.size(), 0);
  for (size_t e = 0; e < p.primes.size(); ++e) {
    int64_t sum = 0;
    for (const auto& perN : p.primes[e])
      for (int64_t prime : perN) {
        p.offsets[e].push_back(sum);
        sum += prime;
      }
    p.tableRows[e] = sum;
  }
}

// Table sizes must match the config: the checkpoint's tables have engram_num_embeddings rows.
Status checkAgainstConfig(const EngramHashParams& p, const ModelConfig& cfg, const std::string& source) {
  for (size_t e = 0; e < p.tableRows.size(); ++e)
    if (p.tableRows[e] != cfg.engramNumEmbeddings[e])
      return Error{fmt::format("{}: engram layer {}: its primes sum to {} rows but engram_num_embeddings[{}] is {}",
                               source, cfg.engramLayerIds[e], p.tableRows[e], e, cfg.engramNumEmbeddings[e])};
  return {};
}

std::vector<int64_t> layerMultipliers(const ModelConfig& cfg, int layer) {
  // B = (INT64_MAX // compressed vocab) // 2 keeps class * multiplier inside int64.
  const int64_t half = std::max<int64_t>(1, (INT64_MAX / cfg.engramCompressedVocabSize) / 2);
  std::vector<int64_t> m = numpyIntegersInt64(uint64_t(10007) * uint64_t(layer), 0, half,
                                              size_t(cfg.engramMaxNgramSize));
  for (int64_t& x : m) x = x * 2 + 1;
  return m;
}

}  // namespace

std::vector<uint64_t> numpySeedSequenceState(uint64_t seed, size_t nWords) {
  const std::vector<uint32_t> entropy = seedWords(seed);
  uint32_t pool[kPoolSize];
  uint32_t hc = kInitA;
  for (size_t i = 0; i < kPoolSize; ++i) pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0, hc);
  for (size_t src = 0; src < kPoolSize; ++src)
    for (size_t dst = 0; dst < kPoolSize; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hc));
  for (size_t src = kPoolSize; src < entropy.size(); ++src)
    for (size_t dst = 0; dst < kPoolSize; ++dst) pool[dst] = mix(pool[dst], hashmix(entropy[src], hc));

  std::vector<uint64_t> out(nWords, 0);
  uint32_t hb = kInitB;
  for (size_t i = 0; i < 2 * nWords; ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hb;
    hb *= kMultB;
    v *= hb;
    v ^= v >> kXShift;
    out[i / 2] |= uint64_t(v) << (32 * (i % 2));  // uint32 pairs viewed as little-endian uint64
  }
  return out;
}

std::vector<int64_t> numpyIntegersInt64(uint64_t seed, int64_t low, int64_t high, size_t count) {
  Pcg64 g = defaultRng(seed);
  const uint64_t rng = uint64_t(high) - uint64_t(low) - 1;  // inclusive range width
  const uint64_t off = uint64_t(low);
  std::vector<int64_t> out(count);
  for (size_t i = 0; i < count; ++i) {
    uint64_t v;
    if (rng == 0) v = 0;
    else if (rng == 0xFFFFFFFFULL) v = g.next32();
    else if (rng < 0xFFFFFFFFULL) v = boundedLemire32(g, uint32_t(rng));
    else if (rng == UINT64_MAX) v = g.next64();
    else v = boundedLemire64(g, rng);
    out[i] = int64_t(off + v);
  }
  return out;
}

bool isPrime64(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t p : {2ULL, 3ULL, 5ULL, 7ULL, 11ULL, 13ULL, 17ULL, 19ULL, 23ULL, 29ULL, 31ULL, 37ULL}) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1) == 0) {
    d >>= 1;
    ++s;
  }
  // These bases make Miller-Rabin deterministic for every 64-bit n.
  for (uint64_t a : {2ULL, 3ULL, 5ULL, 7ULL, 11ULL, 13ULL, 17ULL, 19ULL, 23ULL, 29ULL, 31ULL, 37ULL}) {
    uint64_t x = powMod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int r = 1; r < s; ++r) {
      x = mulMod(x, x, n);
      if (x == n - 1) {
        composite = false;
        break;
      }
    }
    if (composite) return false;
  }
  return true;
}

int64_t nextPrimeAbove(int64_t start) {
  int64_t c = start < 1 ? 2 : start + 1;
  while (!isPrime64(uint64_t(c))) ++c;
  return c;
}

namespace {

// Primes and multipliers by the rules, without comparing against engram_num_embeddings.
Result<EngramHashParams> deriveUnchecked(const ModelConfig& cfg) {
  EngramHashParams p;
  p.maxNgram = cfg.engramMaxNgramSize;
  p.nHeads = cfg.engramNHeads;
  if (cfg.engramLayerIds.empty()) return p;
  if (cfg.engramVocabSize.size() != size_t(cfg.engramMaxNgramSize - 1))
    return Error{fmt::format("engram hashing: engram_vocab_size is not in the config (needed to derive the primes "
                             "when the model directory has no engram_hash.json)")};
  std::set<int64_t> used;  // primes are never reused across heads, n-gram sizes or layers
  for (int layer : cfg.engramLayerIds) {
    std::vector<std::vector<int64_t>> perLayer;
    for (int n = 2; n <= cfg.engramMaxNgramSize; ++n) {
      std::vector<int64_t> heads;
      int64_t search = cfg.engramVocabSize[size_t(n - 2)] - 1;
      for (int h = 0; h < cfg.engramNHeads; ++h) {
        int64_t prime = nextPrimeAbove(search);
        while (used.count(prime)) prime = nextPrimeAbove(prime);
        used.insert(prime);
        heads.push_back(prime);
        search = prime;
      }
      perLayer.push_back(std::move(heads));
    }
    p.primes.push_back(std::move(perLayer));
    p.multipliers.push_back(layerMultipliers(cfg, layer));
  }
  computeOffsets(p);
  return p;
}

}  // namespace

Result<EngramHashParams> deriveEngramHash(const ModelConfig& cfg) {
  auto p = deriveUnchecked(cfg);
  if (!p.ok()) return p.error();
  DI_TRY(checkAgainstConfig(*p, cfg, "engram hashing (derived from engram_vocab_size)"));
  return p;
}

Result<std::vector<int64_t>> engramTableRowsFor(const ModelConfig& cfg) {
  auto p = deriveUnchecked(cfg);
  if (!p.ok()) return p.error();
  return p->tableRows;
}

Result<EngramHashParams> parseEngramHashJson(const std::string& text, const std::string& source,
                                             const ModelConfig& cfg) {
  Result<json::Value> parsed = parseJsonInput(text);
  if (!parsed.ok()) return Error{fmt::format("{}: invalid JSON: {}", source, parsed.error().message)};
  const json::Object* root = parsed->getAsObject();
  if (!root) return Error{fmt::format("{}: the top level must be an object", source)};
  const size_t nLayers = cfg.engramLayerIds.size();
  const size_t nSizes = size_t(cfg.engramMaxNgramSize - 1);
  EngramHashParams p;
  p.maxNgram = cfg.engramMaxNgramSize;
  p.nHeads = cfg.engramNHeads;
  if (const json::Array* ids = root->getArray("layer_ids")) {
    std::vector<int> got;
    for (const json::Value& v : *ids) got.push_back(int(v.getAsInteger().value_or(-1)));
    if (got != cfg.engramLayerIds)
      return Error{fmt::format("{}: layer_ids [{}] differ from the config's engram_layer_ids [{}]", source,
                               fmt::join(got, ", "), fmt::join(cfg.engramLayerIds, ", "))};
  }
  const json::Array* primes = root->getArray("primes");
  if (!primes || primes->size() != nLayers)
    return Error{fmt::format("{}: 'primes' must be a list with one entry per engram layer ({})", source, nLayers)};
  for (size_t e = 0; e < nLayers; ++e) {
    const json::Array* perLayer = (*primes)[e].getAsArray();
    if (!perLayer || perLayer->size() != nSizes)
      return Error{fmt::format("{}: primes[{}] must list {} n-gram sizes (2..{})", source, e, nSizes,
                               cfg.engramMaxNgramSize)};
    std::vector<std::vector<int64_t>> layer;
    for (size_t n = 0; n < nSizes; ++n) {
      const json::Array* heads = (*perLayer)[n].getAsArray();
      if (!heads || heads->size() != size_t(cfg.engramNHeads))
        return Error{fmt::format("{}: primes[{}][{}] must list {} heads", source, e, n, cfg.engramNHeads)};
      std::vector<int64_t> hs;
      for (size_t h = 0; h < heads->size(); ++h) {
        auto v = (*heads)[h].getAsInteger();
        if (!v || *v < 2 || !isPrime64(uint64_t(*v)))
          return Error{fmt::format("{}: primes[{}][{}][{}] must be a prime", source, e, n, h)};
        hs.push_back(*v);
      }
      layer.push_back(std::move(hs));
    }
    p.primes.push_back(std::move(layer));
  }
  const json::Array* mults = root->getArray("multipliers");
  if (!mults || mults->size() != nLayers)
    return Error{fmt::format("{}: 'multipliers' must be a list with one entry per engram layer ({})", source, nLayers)};
  const int64_t bound = INT64_MAX / cfg.engramCompressedVocabSize;
  for (size_t e = 0; e < nLayers; ++e) {
    const json::Array* m = (*mults)[e].getAsArray();
    if (!m || m->size() != size_t(cfg.engramMaxNgramSize))
      return Error{fmt::format("{}: multipliers[{}] must list {} values", source, e, cfg.engramMaxNgramSize)};
    std::vector<int64_t> ms;
    for (size_t k = 0; k < m->size(); ++k) {
      auto v = (*m)[k].getAsInteger();
      // class * multiplier must stay inside int64 for every class id.
      if (!v || *v <= 0 || *v > bound)
        return Error{fmt::format("{}: multipliers[{}][{}] must be an integer in [1, {}]", source, e, k, bound)};
      ms.push_back(*v);
    }
    p.multipliers.push_back(std::move(ms));
  }
  computeOffsets(p);
  DI_TRY(checkAgainstConfig(p, cfg, source));
  return p;
}

Result<EngramHashParams> loadEngramHash(const std::string& modelDir, const ModelConfig& cfg) {
  const std::string path = modelDir + "/engram_hash.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return deriveEngramHash(cfg);
  // Primes for every layer, n-gram size and head: a few MB at most.
  auto text = readFileBounded(path, kMaxConfigBytes, "engram hash file");
  if (!text.ok()) return text.error();
  return parseEngramHashJson(*text, path, cfg);
}

std::string engramHashToJson(const EngramHashParams& p) {
  json::Array primes, mults;
  for (const auto& layer : p.primes) {
    json::Array l;
    for (const auto& heads : layer) {
      json::Array h;
      for (int64_t x : heads) h.push_back(x);
      l.push_back(std::move(h));
    }
    primes.push_back(std::move(l));
  }
  for (const auto& m : p.multipliers) {
    json::Array a;
    for (int64_t x : m) a.push_back(x);
    mults.push_back(std::move(a));
  }
  json::Object root{{"primes", std::move(primes)}, {"multipliers", std::move(mults)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << json::Value(std::move(root));
  os.flush();
  return text + "\n";
}

Result<std::vector<int32_t>> loadTokenMap(const std::string& modelDir, const ModelConfig& cfg) {
  const std::string path = modelDir + "/token_map.i32";
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Error{fmt::format("{}: missing (the model has engram layers and needs the token class map)", path)};
  const std::streamoff size = in.tellg();
  if (size != std::streamoff(cfg.vocabSize * 4))
    return Error{fmt::format("{}: {} bytes, expected {} (4 bytes per token, vocab_size {})", path, int64_t(size),
                             cfg.vocabSize * 4, cfg.vocabSize)};
  in.seekg(0);
  std::vector<uint8_t> raw{};
  raw.resize(size_t(size));
  in.read(reinterpret_cast<char*>(raw.data()), size);
  if (!in) return Error{fmt::format("{}: read error", path)};
  std::vector<int32_t> map(size_t(cfg.vocabSize));
  for (size_t i = 0; i < map.size(); ++i) {
    const uint32_t u = uint32_t(raw[4 * i]) | uint32_t(raw[4 * i + 1]) << 8 | uint32_t(raw[4 * i + 2]) << 16 |
                       uint32_t(raw[4 * i + 3]) << 24;
    map[i] = int32_t(u);
    if (map[i] < 0 || map[i] >= cfg.engramCompressedVocabSize)
      return Error{fmt::format("{}: token {} maps to class {}, outside [0, {}) (engram_compressed_vocab_size)", path,
                               i, map[i], cfg.engramCompressedVocabSize)};
  }
  return map;
}

int64_t engramPadClass(const std::vector<int32_t>& tokenMap, const ModelConfig& cfg) {
  return tokenMap.at(size_t(cfg.engramPadTokenId));
}

void engramRowIds(const EngramHashParams& p, int engramIndex, const int64_t* window, int64_t* rowsOut) {
  const auto& mult = p.multipliers[size_t(engramIndex)];
  const auto& primes = p.primes[size_t(engramIndex)];
  const auto& offsets = p.offsets[size_t(engramIndex)];
  // Class ids and multipliers are non-negative and their products fit int64, so the unsigned
  // XOR-fold equals numpy's int64 one.
  uint64_t folded = uint64_t(window[0]) * uint64_t(mult[0]);
  size_t out = 0;
  for (int n = 2; n <= p.maxNgram; ++n) {
    folded ^= uint64_t(window[n - 1]) * uint64_t(mult[size_t(n - 1)]);
    for (int h = 0; h < p.nHeads; ++h, ++out)
      rowsOut[out] = int64_t(folded % uint64_t(primes[size_t(n - 2)][size_t(h)])) + offsets[out];
  }
}

std::vector<int64_t> engramRowIdsForSequence(const EngramHashParams& p, int engramIndex,
                                             const std::vector<int64_t>& classes, int64_t padClass) {
  const size_t per = size_t(p.lookupsPerToken());
  std::vector<int64_t> rows(classes.size() * per);
  std::vector<int64_t> window(size_t(p.maxNgram));
  for (size_t t = 0; t < classes.size(); ++t) {
    for (size_t k = 0; k < window.size(); ++k) window[k] = t >= k ? classes[t - k] : padClass;
    engramRowIds(p, engramIndex, window.data(), rows.data() + t * per);
  }
  return rows;
}

}  // namespace deepinfer
