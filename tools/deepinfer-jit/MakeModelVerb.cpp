// `deepinfer-jit make-model`: writes a random-weight checkpoint with the real tensor names,
// dtypes and quantization formats (runtime/model/MakeModel.h).
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "Args.h"
#include "Verbs.h"
#include "model/MakeModel.h"
#include "model/Safetensors.h"

using namespace deepinfer;

namespace {

Result<uint64_t> parseUnsigned(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0)
    return Error{fmt::format("--{}: '{}' is not a non-negative integer", flag, text)};
  return uint64_t(v);
}

// Stored bytes and bf16-dequantized bytes of a config's checkpoint, for the summary line.
void sizes(const ModelConfig& cfg, double* diskGb, double* bf16Gb) {
  double disk = 0, bf16 = 0;
  for (const ModelTensorSpec& s : modelTensorSpecs(cfg)) {
    double n = 1;
    for (int64_t d : s.shape) n *= double(d);
    double scaleN = 1;
    for (int64_t d : s.scaleShape()) scaleN *= double(d);
    disk += s.format == WeightFormat::Fp4 ? n / 2 + scaleN
            : s.hasScale()                ? n + scaleN
                                          : n * double(safetensorsDtypeSize(s.dtype));
    bf16 += s.dtype == "F32" ? 4 * n : 2 * n;
  }
  *diskGb = disk / 1e9;
  *bf16Gb = bf16 / 1e9;
}

// Library errors already start with "make-model: "; print them once, under the tool's name.
std::string withoutPrefix(const std::string& msg) {
  const std::string prefix = "make-model: ";
  return msg.rfind(prefix, 0) == 0 ? msg.substr(prefix.size()) : msg;
}

}  // namespace

int verbMakeModel(const std::vector<std::string>& argv) {
  cli::Args args("make-model",
                 "make-model --preset NAME --out DIR [--seed S] [--threads N] [--max-shard-gb G] [--quiet]\n\n"
                 "Writes config.json, model.safetensors (or shards + model.safetensors.index.json),\n"
                 "token_map.i32 and engram_hash.json with random weights shaped for testing.\n"
                 "Presets:\n" +
                     makeModelPresetSummary());
  args.option("preset", "NAME", "tiny or proxy")
      .option("out", "DIR", "output model directory (created if missing)")
      .option("seed", "S", "random seed (default 1); the same seed writes identical files")
      .option("threads", "N", "generation threads (default: all hardware threads)")
      .option("max-shard-gb", "G", "largest safetensors shard in GB (default 4)")
      .flag("quiet", "no progress lines on stderr");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (!args.positional().empty())
    return args.usageError(fmt::format("unexpected argument '{}'", args.positional().front()));
  if (!args.has("preset")) return args.usageError("--preset is required (tiny, proxy)");
  if (!args.has("out")) return args.usageError("--out DIR is required");

  MakeModelOptions opts;
  opts.preset = args.get("preset");
  opts.outDir = args.get("out");
  opts.verbose = !args.has("quiet");
  auto seed = parseUnsigned("seed", args.get("seed", "1"));
  if (!seed.ok()) return args.usageError(seed.error().message);
  opts.seed = *seed;
  const auto threads = cli::threadCount(args, "threads", 0, 0);
  if (!threads) return 2;
  opts.threads = *threads;
  auto shardGb = parseUnsigned("max-shard-gb", args.get("max-shard-gb", "4"));
  if (!shardGb.ok() || *shardGb == 0 || *shardGb > 1024)
    return args.usageError(fmt::format("--max-shard-gb: '{}' must be 1..1024", args.get("max-shard-gb")));
  opts.maxShardBytes = *shardGb << 30;

  auto cfg = makeModelPresetConfig(opts.preset);
  if (!cfg.ok()) return args.usageError(withoutPrefix(cfg.error().message));
  double diskGb = 0, bf16Gb = 0;
  sizes(*cfg, &diskGb, &bf16Gb);
  if (opts.verbose)
    fmt::print(stderr, "make-model: preset {} -> {} ({:.2f} GB on disk, {:.2f} GB as bf16)\n", opts.preset,
               opts.outDir, diskGb, bf16Gb);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = makeModelFromConfig(*cfg, opts);
  if (!st.ok()) {
    fmt::print(stderr, "deepinfer-jit make-model: {}\n", withoutPrefix(st.error().message));
    return 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("wrote {} (preset {}, seed {}) in {:.1f} s\n", opts.outDir, opts.preset, opts.seed, secs);
  return 0;
}
