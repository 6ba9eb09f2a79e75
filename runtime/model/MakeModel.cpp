// make-model: streams a synthetic checkpoint to disk tensor by tensor (a proxy model is far
// larger than the memory of the machine writing it), then the side files.
#include "MakeModel.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "AtomicFile.h"
#include "EngramHash.h"
#include "QuantEncode.h"
#include "deepinfer/InputFiles.h"
#include "Safetensors.h"
#include "SyntheticWeights.h"
#include "deepinfer/Tensor.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

namespace deepinfer {
namespace {

namespace fs = std::filesystem;

// Rows per generation task: 32 keeps fp8 32x32 blocks inside one task.
constexpr int64_t kBandRows = 32;

uint64_t bytesOf(const std::string& dtype, const std::vector<int64_t>& shape) {
  uint64_t n = safetensorsDtypeSize(dtype);
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

// One entry of the written files: a weight or the scale of the weight before it.
struct FileEntry {
  TensorSpec spec;
  size_t weight;       // index into the ModelTensorSpec list
  bool isScale;
};

class CheckpointWriter {
 public:
  CheckpointWriter(const ModelConfig& cfg, const SyntheticWeights& synth, const MakeModelOptions& opts)
      : synth_(synth), opts_(opts), weights_(modelTensorSpecs(cfg)) {
    for (size_t i = 0; i < weights_.size(); ++i) {
      const ModelTensorSpec& w = weights_[i];
      entries_.push_back({TensorSpec{w.name, w.dtype, w.storedShape()}, i, false});
      if (w.hasScale()) entries_.push_back({TensorSpec{scaleNameFor(w.name), "F8_E8M0", w.scaleShape()}, i, true});
    }
    threads_ = opts.threads > 0 ? opts.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  }

  Status write() {
    // Shards: consecutive entries up to maxShardBytes; a weight and its scale stay together.
    std::vector<std::vector<size_t>> shards(1);
    uint64_t inShard = 0, total = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
      const uint64_t b = bytesOf(entries_[i].spec.dtype, entries_[i].spec.shape);
      if (!entries_[i].isScale && inShard > 0 && inShard + b > opts_.maxShardBytes) {
        shards.emplace_back();
        inShard = 0;
      }
      shards.back().push_back(i);
      inShard += b;
      total += b;
    }
    const fs::path dir(opts_.outDir);
    const fs::path index = dir / "model.safetensors.index.json", single = dir / "model.safetensors";
    std::error_code ec;
    if (shards.size() == 1) {
      DI_TRY(writeShard(single.string(), shards[0]));
      fs::remove(index, ec);  // a stale index would take precedence over the new file
      return {};
    }
    llvm::json::Object weightMap;
    for (size_t s = 0; s < shards.size(); ++s) {
      const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
      DI_TRY(writeShard((dir / file).string(), shards[s]));
      for (size_t i : shards[s]) weightMap[entries_[i].spec.name] = file;
    }
    llvm::json::Object root{{"metadata", llvm::json::Object{{"total_size", int64_t(total)}}},
                            {"weight_map", std::move(weightMap)}};
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root)));
    os.flush();
    DI_TRY(writeFileAtomic(index.string(), text + "\n"));
    fs::remove(single, ec);
    return {};
  }

 private:
  Status writeShard(const std::string& path, const std::vector<size_t>& ids) {
    std::vector<TensorSpec> specs;
    for (size_t i : ids) specs.push_back(entries_[i].spec);
    if (opts_.verbose) fmt::print(stderr, "make-model: writing {} ({} tensors)\n", path, specs.size());
    return writeSafetensorsStreamed(path, specs, [&](size_t k, const TensorSpec&, std::vector<uint8_t>& bytes) {
      const FileEntry& e = entries_[ids[k]];
      if (e.isScale) {
        bytes = std::move(pendingScales_[e.weight]);
        pendingScales_.erase(e.weight);
        return Status{};
      }
      produce(e.weight, bytes);
      return Status{};
    });
  }

  // Generates weight `w`: bands of rows in parallel (each band writes its own bytes and
  // scales), so the result does not depend on the thread count.
  void produce(size_t w, std::vector<uint8_t>& bytes) {
    const ModelTensorSpec& spec = weights_[w];
    const int64_t rows = spec.shape.size() == 2 ? spec.shape[0] : 1;
    const int64_t cols = spec.shape.size() == 2 ? spec.shape[1] : spec.shape[0];
    bytes.assign(bytesOf(spec.dtype, spec.storedShape()), 0);
    std::vector<uint8_t> scales(spec.hasScale() ? bytesOf("F8_E8M0", spec.scaleShape()) : 0);
    const int64_t scaleCols = spec.hasScale() ? spec.scaleShape()[1] : 0;
    const int64_t bands = (rows + kBandRows - 1) / kBandRows;
    std::atomic<int64_t> next{0};
    auto worker = [&] {
      std::vector<float> buf;
      for (int64_t b = next++; b < bands; b = next++) {
        const int64_t r0 = b * kBandRows, r1 = std::min(rows, r0 + kBandRows), n = r1 - r0;
        buf.resize(size_t(n * cols));
        synth_.fillRows(spec, r0, r1, buf.data());
        switch (spec.format) {
          case WeightFormat::Plain:
            if (spec.dtype == "BF16") {
              uint16_t* o = reinterpret_cast<uint16_t*>(bytes.data()) + r0 * cols;
              for (int64_t i = 0; i < n * cols; ++i) o[i] = floatToBf16(buf[size_t(i)]);
            } else {  // F32
              std::memcpy(bytes.data() + r0 * cols * 4, buf.data(), size_t(n * cols) * 4);
            }
            break;
          case WeightFormat::Fp8Block:
            quantizeFp8Blocks(buf.data(), n, cols, bytes.data() + r0 * cols, scales.data() + (r0 / 32) * scaleCols);
            break;
          case WeightFormat::Fp8Row:
            quantizeFp8Rows(buf.data(), n, cols, bytes.data() + r0 * cols, scales.data() + r0 * scaleCols);
            break;
          case WeightFormat::Fp4:
            quantizeFp4Rows(buf.data(), n, cols, bytes.data() + r0 * (cols / 2), scales.data() + r0 * scaleCols);
            break;
        }
      }
    };
    const int nThreads = int(std::min<int64_t>(threads_, bands));
    if (nThreads <= 1) {
      worker();
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < nThreads; ++t) pool.emplace_back(worker);
      for (std::thread& t : pool) t.join();
    }
    if (spec.hasScale()) pendingScales_[w] = std::move(scales);
  }

  const SyntheticWeights& synth_;
  const MakeModelOptions& opts_;
  std::vector<ModelTensorSpec> weights_;
  std::vector<FileEntry> entries_;
  std::map<size_t, std::vector<uint8_t>> pendingScales_;
  int threads_ = 1;
};

Status writeTokenMap(const std::string& path, const std::vector<int32_t>& map) {
  std::vector<uint8_t> bytes(map.size() * 4);
  for (size_t i = 0; i < map.size(); ++i)
    for (int b = 0; b < 4; ++b) bytes[4 * i + size_t(b)] = uint8_t(uint32_t(map[i]) >> (8 * b));
  return writeFileAtomic(path, bytes.data(), bytes.size());
}

}  // namespace

Status makeModelFromConfig(const ModelConfig& cfgIn, const MakeModelOptions& opts) {
  ModelConfig cfg = cfgIn;
  DI_TRY(finalizeModelConfig(cfg, "make-model config"));
  if (opts.outDir.empty()) return Error{"make-model: no output directory given (--out DIR)"};
  if (opts.maxShardBytes == 0) return Error{"make-model: the shard size bound must be > 0"};
  if (opts.threads < 0 || opts.threads > kMaxThreads)
    return Error{fmt::format("make-model: {} threads is not a thread count (0..{})", opts.threads, kMaxThreads)};
  std::error_code ec;
  fs::create_directories(opts.outDir, ec);
  if (ec) return Error{fmt::format("make-model: cannot create '{}': {}", opts.outDir, ec.message())};

  auto synth = SyntheticWeights::create(cfg, opts.seed);
  if (!synth.ok()) return synth.error();
  EngramHashParams hash;
  if (!cfg.engramLayerIds.empty()) {
    auto h = deriveEngramHash(cfg);
    if (!h.ok()) return h.error();
    hash = std::move(*h);
  }

  CheckpointWriter writer(cfg, *synth, opts);
  DI_TRY(writer.write());
  const fs::path dir(opts.outDir);
  if (!cfg.engramLayerIds.empty()) {
    DI_TRY(writeTokenMap((dir / "token_map.i32").string(), synth->tokenMap()));
    DI_TRY(writeFileAtomic((dir / "engram_hash.json").string(), engramHashToJson(hash)));
  }
  // config.json last: a directory with a config is a complete model.
  return writeFileAtomic((dir / "config.json").string(), modelConfigToJson(cfg));
}

Status makeModel(const MakeModelOptions& opts) {
  auto cfg = makeModelPresetConfig(opts.preset);
  if (!cfg.ok()) return cfg.error();
  return makeModelFromConfig(*cfg, opts);
}

}  // namespace deepinfer
