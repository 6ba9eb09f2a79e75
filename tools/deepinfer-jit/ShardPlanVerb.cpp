// `deepinfer-jit shard-plan`: how a model splits over tp x pp GPUs (runtime/model/parallel/
// ShardPlan.h): each rank's layers, heads, output groups, experts and vocabulary rows, its bytes
// of weights, the kv sources it mirrors, the traffic per token and the KV capacity per GPU.
#include <fmt/format.h>

#include <cstdlib>

#include "Args.h"
#include "Verbs.h"
#include "model/MakeModelPresets.h"
#include "model/ModelConfig.h"
#include "model/parallel/ShardPlan.h"

using namespace deepinfer;


int verbShardPlan(const std::vector<std::string>& argv) {
  cli::Args args("shard-plan",
                 "shard-plan (--model DIR | --preset flash|proxy|tiny) [--tp N] [--pp M] [--stage-layers 14,14,12] "
                 "[--gpu-memory-gb G] [--max-requests R] [--no-draft]\n\n"
                 "Prints how the model splits over tp x pp GPUs: tensor parallelism inside a stage (heads, output "
                 "groups, shared-expert rows and columns, vocabulary rows; routed experts in contiguous ranges), "
                 "pipeline stages over layer ranges; each rank's bytes of weights as stored, the kv sources a stage "
                 "mirrors from an earlier one, the bytes per token sent and all-reduced, and with --gpu-memory-gb "
                 "the KV capacity per GPU and in total.");
  args.option("model", "DIR", "a model directory (its config.json)")
      .option("preset", "NAME", "flash (the real V4.1-Flash config), proxy or tiny")
      .option("tp", "N", "tensor ranks per stage (default 1)")
      .option("pp", "M", "pipeline stages (default 1)")
      .option("stage-layers", "LIST", "layers per stage, e.g. 14,14,12 (default: an even split)")
      .option("gpu-memory-gb", "G", "memory per GPU in GB, for the KV capacity report")
      .option("max-requests", "R", "requests whose window rings are reserved (default 16)")
      .flag("no-draft", "leave the DSpark draft out");
  if (int rc = args.parse(argv); rc != 0) return rc < 0 ? 0 : rc;
  if (!args.positional().empty())
    return args.usageError(fmt::format("unexpected argument '{}'", args.positional().front()));
  if (args.has("model") == args.has("preset")) return args.usageError("give exactly one of --model and --preset");
  Result<ModelConfig> cfg = Error{""};
  if (args.has("model")) {
    cfg = loadModelConfig(args.get("model"));
  } else if (args.get("preset") == "flash") {
    cfg = v41FlashDefaults();
  } else {
    cfg = makeModelPresetConfig(args.get("preset"));
  }
  if (!cfg.ok()) {
    fmt::print(stderr, "deepinfer-jit shard-plan: {}\n", cfg.error().message);
    return 1;
  }
  ParallelShape shape;
  constexpr int64_t kMaxRanks = 1'000'000;
  auto tp = cli::parseInteger("tp", args.get("tp", "1"), 1, kMaxRanks);
  if (!tp.ok()) return args.usageError(tp.error().message);
  auto pp = cli::parseInteger("pp", args.get("pp", "1"), 1, kMaxRanks);
  if (!pp.ok()) return args.usageError(pp.error().message);
  shape.tp = int(*tp);
  shape.pp = int(*pp);
  if (args.has("stage-layers")) {
    auto layers = cli::parseIntegerList("stage-layers", args.get("stage-layers"), 1, kMaxRanks);
    if (!layers.ok()) return args.usageError(layers.error().message);
    shape.stageLayers.assign(layers->begin(), layers->end());
  }
  auto plan = planShards(*cfg, shape, !args.has("no-draft"));
  if (!plan.ok()) {
    fmt::print(stderr, "deepinfer-jit shard-plan: {}\n", plan.error().message);
    return 1;
  }
  std::optional<KvCapacityReport> kv;
  if (args.has("gpu-memory-gb")) {
    char* end = nullptr;
    const std::string g = args.get("gpu-memory-gb");
    const double gb = std::strtod(g.c_str(), &end);
    if (g.empty() || *end != '\0' || !(gb > 0 && gb < 1e6)) return args.usageError(fmt::format("--gpu-memory-gb: '{}' is not a positive size", g));
    auto requests = cli::parseInteger("max-requests", args.get("max-requests", "16"), 1, kMaxRanks);
    if (!requests.ok()) return args.usageError(requests.error().message);
    auto r = kvCapacity(*plan, int64_t(gb * 1e9), int(*requests));
    if (!r.ok()) {
      fmt::print(stderr, "deepinfer-jit shard-plan: {}\n", r.error().message);
      return 1;
    }
    kv = *r;
  }
  fmt::print("{}", describeShardPlan(*plan, kv ? &*kv : nullptr));
  return 0;
}
