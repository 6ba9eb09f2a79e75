// Shape buckets of the tuning cache: one tuned winner serves every shape of a bucket, so a
// winner found at one problem size is never reused at a very different one (docs/caches.md:
// the tuning key holds the shape bucket). Each op is bucketed along the one variable that moves
// its best config (its family's bucketAxis / bucketValue); the others are fixed by the model.
//
// Bucket i holds (edge[i-1], edge[i]] (the first starts at 1) and is tuned at edge[i]; the last
// bucket is open-ended (everything above the second-to-last edge, tuned at the last edge).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deepinfer/KernelFamily.h"

namespace deepinfer {

struct ShapeBucket {
  std::string var;             // "B", "T", "context", "N"
  int64_t lo = 1, hi = 0;      // inclusive; hi = INT64_MAX for the open last bucket
  int64_t representative = 0;  // the size the bucket is tuned at
  std::string cls;             // bucketClass of the description ("" for most ops)
  // "B=5..8", "T=1", "T>=1025" (prefixed by the class, if any): the name in the tuning cache.
  std::string label() const;
};

// The bucket variable and edges of an op (nullopt: an op without buckets).
std::optional<BucketAxis> bucketAxis(const std::string& op);

// Every bucket of an op, in increasing order.
std::vector<ShapeBucket> shapeBuckets(const std::string& op);
// The bucket holding `value` (values < 1 go to the first bucket).
std::optional<ShapeBucket> bucketOf(const std::string& op, int64_t value);
// The bucket variable's value in an op description, nullopt when absent.
std::optional<int64_t> bucketValue(const OpDesc& d);
std::optional<ShapeBucket> bucketFor(const OpDesc& d);
// The part of an op's shape its buckets keep apart besides the bucket variable (its family's
// bucketClass), e.g. weight_gemm's "fp8 1280x5120 f32"; "" for most ops.
std::string bucketClass(const OpDesc& d);

// The op's tensor dtypes as the tuning key spells them: its inputs' dtypes in signature order,
// e.g. "BF16,U8,I32".
std::string opDtypes(const std::string& op);

}  // namespace deepinfer
