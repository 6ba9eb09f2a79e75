// Engram n-gram hashing (docs/model.md §8): the per-layer primes, row offsets and multipliers,
// the token -> class map, and the row ids of one token's 24 lookups. The constants are
// bit-exact requirements: the multipliers reproduce numpy's
// `default_rng(10007 * layer).integers(0, B, maxNgram, dtype=int64) * 2 + 1`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ModelConfig.h"
#include "deepinfer/Error.h"

namespace deepinfer {

struct EngramHashParams {
  int maxNgram = 0;  // n-grams of sizes 2..maxNgram
  int nHeads = 0;    // heads per n-gram size
  // Per engram layer (order of engram_layer_ids):
  std::vector<std::vector<std::vector<int64_t>>> primes;  // [e][n-2][head]
  std::vector<std::vector<int64_t>> multipliers;          // [e][maxNgram], all odd
  std::vector<std::vector<int64_t>> offsets;              // [e][(n-2)*nHeads + head]
  std::vector<int64_t> tableRows;                         // [e] = sum of that layer's primes

  int lookupsPerToken() const { return (maxNgram - 1) * nHeads; }  // 24 in V4.1
};

// Primes and multipliers by the rules of §8 (needs cfg.engramVocabSize). Offsets are the
// exclusive prefix sums of each layer's primes in (n-gram size, head) order.
Result<EngramHashParams> deriveEngramHash(const ModelConfig& cfg);

// Table rows per engram layer that the prime rule gives (the sum of each layer's primes), for
// filling engram_num_embeddings when a config is written. Needs cfg.engramVocabSize.
Result<std::vector<int64_t>> engramTableRowsFor(const ModelConfig& cfg);

// `<modelDir>/engram_hash.json` when present ("primes" [layer][n-1][head], "multipliers"
// [layer][maxNgram]; offsets recomputed), else deriveEngramHash. Either way each layer's
// table rows must equal cfg.engramNumEmbeddings.
Result<EngramHashParams> loadEngramHash(const std::string& modelDir, const ModelConfig& cfg);
Result<EngramHashParams> parseEngramHashJson(const std::string& text, const std::string& sourceName,
                                             const ModelConfig& cfg);
std::string engramHashToJson(const EngramHashParams& p);

// `<modelDir>/token_map.i32`: int32 little-endian, one class id per vocabulary token, each in
// [0, engram_compressed_vocab_size).
Result<std::vector<int32_t>> loadTokenMap(const std::string& modelDir, const ModelConfig& cfg);

// The class that fills n-gram history before the first token: token_map[engram_pad_token_id].
int64_t engramPadClass(const std::vector<int32_t>& tokenMap, const ModelConfig& cfg);

// Row ids (into the layer's table) of one token's lookups, in (n-gram size, head) order.
// `window[k]` is the class id k tokens back (window[0] = the token itself), k < maxNgram; the
// caller fills positions before the first token with the pad class. rowsOut has
// lookupsPerToken() entries: (XOR over k<n of window[k]*mult[k]) mod prime + offset.
void engramRowIds(const EngramHashParams& p, int engramIndex, const int64_t* window, int64_t* rowsOut);

// Row ids for every token of a class sequence; classes before `history` run out are the pad
// class. Output [classes.size() * lookupsPerToken()].
std::vector<int64_t> engramRowIdsForSequence(const EngramHashParams& p, int engramIndex,
                                             const std::vector<int64_t>& classes, int64_t padClass);

// --- numpy reproductions (exposed for tests) ---
// numpy.random.SeedSequence(seed).generate_state(nWords, uint64).
std::vector<uint64_t> numpySeedSequenceState(uint64_t seed, size_t nWords);
// numpy.random.default_rng(seed).integers(low, high, count, dtype=int64), high > low.
std::vector<int64_t> numpyIntegersInt64(uint64_t seed, int64_t low, int64_t high, size_t count);
// Smallest prime > start (deterministic Miller-Rabin for 64-bit).
int64_t nextPrimeAbove(int64_t start);
bool isPrime64(uint64_t n);

}  // namespace deepinfer
