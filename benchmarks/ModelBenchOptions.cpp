#include "ModelBenchOptions.h"

#include <fmt/format.h>

#include <cstdlib>

namespace deepinfer::bench {

std::string modelBenchUsage() {
  return "usage: deepinfer-model-bench (--model DIR | --synthetic flash [--experts N] | --synthetic proxy) [--out FILE]\n"
         "                             [--contexts N,N] [--streams N,N]\n"
         "                             [--decode-steps N] [--chunk N] [--prompt N] [--kv-bytes B]\n"
         "                             [--repeats N] [--seed N] [--commit SHA] [--quick] [--no-speculative]\n"
         "                             [--pdl on|off] [--tp N]\n"
         "       deepinfer-model-bench (--model DIR | --synthetic flash|proxy) --long-context N [--decode-contexts N,N]\n"
         "                             [--segment N] [--time-budget S] [--chunk N] [--decode-steps N] [--repeats N]\n"
         "\n"
         "Runs a V4.1 model through the GPU runtime (GpuModel) on GPU 0 and measures cold prefill\n"
         "throughput and time to first token per context, decode throughput per number of streams\n"
         "(batched and serial) and the KV cache footprint, each against the roofline of the measured\n"
         "copy bandwidth and mma.sync bf16 rate. With DSpark draft layers it also measures speculative\n"
         "decoding at each stream count: a plain step, the draft pass, verify steps with the target's own\n"
         "greedy continuation as drafts, made wrong after the a-th (oracle a = 0 .. block; tok/s vs\n"
         "acceptance length; the continuation is recorded at the verify steps' own batch shape, and a step\n"
         "that accepts other than a fails the run) and the draft model's natural acceptance. Prints a\n"
         "table; writes JSON.\n"
         "\n"
         "  --model DIR        model directory (config.json + safetensors), e.g. make-model --preset proxy\n"
         "  --synthetic flash  no checkpoint: V4.1-Flash's 40 layers and widths with synthetic weights in the\n"
         "                     checkpoint's formats, generated on the host and uploaded (GpuModel::loadSynthetic),\n"
         "                     with the DSpark draft (mtp.0-2, 128 experts each, 7.9 GB) unless --no-speculative\n"
         "                     or it does not fit (then left out, saying why); KV budget 4 GiB unless --kv-bytes;\n"
         "                     refused before loading when the weights and a reserve for caches and workspaces\n"
         "                     do not fit\n"
         "  --synthetic proxy  make-model's proxy (7 layers at V4.1-Flash widths, 128 experts) the same way: no\n"
         "                     checkpoint on disk, the same shapes and bytes per token as --model on a proxy\n"
         "  --experts N        routed experts per layer of --synthetic flash (default: the most that fit next to the\n"
         "                     draft, a multiple of 16, up to 384)\n"
         "  --out FILE         JSON output (default benchmarks/results/model-<gpu-slug>-<date>.json;\n"
         "                     with --long-context model-long-context-<gpu-slug>-<date>.json)\n"
         "  --contexts LIST    prefill contexts in tokens (default 16384,65536)\n"
         "  --streams LIST     decode streams (default 1,4,12); each measured batched (one forward call\n"
         "                     per step) and serial (streams stepped one after another, not batched)\n"
         "  --decode-steps N   decode steps per timed repetition (default 32)\n"
         "  --chunk N          prefill chunk tokens (default 1024)\n"
         "  --prompt N         prompt tokens of every decode stream (default 512)\n"
         "  --kv-bytes B       KV cache budget in bytes (default: the runtime's, half the free memory\n"
         "                     after the weights)\n"
         "  --repeats N        timed repetitions of each decode measurement, median (default 3)\n"
         "  --seed N           token-id seed (default fixed, so runs compare)\n"
         "  --commit SHA       git commit recorded in the JSON (default $DI_GIT_COMMIT, else the build's)\n"
         "  --quick            smoke sizes: contexts 2048,8192, streams 1,4, 8 steps, 1 repeat, prompt 128\n"
         "  --no-speculative   skip the speculative-decoding measurements (--synthetic: build no draft)\n"
         "  --tp N             tensor ranks (docs/parallelism.md §2): one GPU each from GPU 0 when that many\n"
         "                     are visible (NCCL), else logical ranks on GPU 0 (a test double: no speed)\n"
         "  --pdl on|off       programmatic dependent launch of the kernels compiled for sm_90+ on a 9.0+ GPU\n"
         "                     (default on unless DEEPINFER_PDL=0): a kernel's launch overlaps the previous\n"
         "                     kernel's drain, in the graphs too; the report says which was used\n"
         "\n"
         "Long context (--long-context N, e.g. 1048576): the KV cache is sized for N tokens (refused before\n"
         "loading, naming the shortfall, when the weights, the cache and the prefill's scratch do not fit);\n"
         "one request is prefilled in chunks to N minus the decode tokens, reporting tok/s per segment and\n"
         "the time to first token; single-stream decode is measured on it at N and on fresh requests\n"
         "prefilled to each decode context; 'how flat' = decode tok/s at N / at the first decode context.\n"
         "Replaces --contexts/--streams; no speculative rows.\n"
         "  --long-context N   context in tokens (at most max_position_embeddings)\n"
         "  --decode-contexts LIST  decode measured at these contexts too (default 16384,131072; each < N)\n"
         "  --segment N        prefill reported per N positions (default 131072; a multiple of --chunk)\n"
         "  --time-budget S    stop prefilling once S seconds of the run have passed, then measure decode at\n"
         "                     the context reached and write the report (default 0: no limit)\n";
}

namespace {

Result<int64_t> integer(const std::string& flag, const std::string& v, int64_t lo) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 0);
  if (v.empty() || *end != '\0' || x < lo) return Error{fmt::format("{} expects an integer >= {}, got '{}'", flag, lo, v)};
  return int64_t(x);
}

Result<std::vector<int64_t>> integerList(const std::string& flag, const std::string& v, int64_t lo) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= v.size()) {
    const size_t comma = v.find(',', at);
    const std::string item = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    auto n = integer(flag, item, lo);
    if (!n.ok()) return n.error();
    out.push_back(*n);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

}  // namespace

Result<ModelBenchOptions> parseModelBenchOptions(int argc, char** argv) {
  ModelBenchOptions o;
  bool setContexts = false, setStreams = false, setSteps = false, setRepeats = false, setPrompt = false;
  bool setKv = false, setDecodeContexts = false, setSegment = false, setBudget = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      continue;
    }
    if (a == "--quick") {
      o.quick = true;
      continue;
    }
    if (a == "--no-speculative") {
      o.speculative = false;
      continue;
    }
    static const char* const kValued[] = {"--model", "--out", "--contexts", "--streams", "--decode-steps", "--chunk",
                                          "--prompt", "--kv-bytes", "--repeats", "--seed", "--commit",
                                          "--synthetic", "--experts", "--long-context", "--decode-contexts",
                                          "--segment", "--time-budget", "--pdl", "--tp"};
    bool known = false;
    for (const char* k : kValued) known = known || a == k;
    if (!known) return Error{fmt::format("unknown option '{}'", a)};
    if (i + 1 >= argc) return Error{fmt::format("{} needs a value", a)};
    const std::string v = argv[++i];
    if (a == "--model") o.model = v;
    else if (a == "--synthetic") o.synthetic = v;
    else if (a == "--out") o.out = v;
    else if (a == "--commit") o.commit = v;
    else if (a == "--pdl") {
      if (v != "on" && v != "off") return Error{fmt::format("--pdl '{}': give on or off", v)};
      o.pdl = v == "on";
    }
    else if (a == "--contexts") {
      auto l = integerList(a, v, 2);
      if (!l.ok()) return l.error();
      o.contexts = *l;
      setContexts = true;
    } else if (a == "--decode-contexts") {
      auto l = integerList(a, v, 1);
      if (!l.ok()) return l.error();
      o.decodeContexts = *l;
      setDecodeContexts = true;
    } else if (a == "--streams") {
      auto l = integerList(a, v, 1);
      if (!l.ok()) return l.error();
      o.streams.assign(l->begin(), l->end());
      setStreams = true;
    } else {
      auto n = integer(a, v, a == "--seed" || a == "--kv-bytes" || a == "--time-budget" ? 0 : 1);
      if (!n.ok()) return n.error();
      if (a == "--decode-steps") o.decodeSteps = int(*n), setSteps = true;
      if (a == "--chunk") o.chunk = *n;
      if (a == "--prompt") o.promptTokens = *n, setPrompt = true;
      if (a == "--kv-bytes") o.kvBytes = *n, setKv = true;
      if (a == "--long-context") o.longContext = *n;
      if (a == "--segment") o.segment = *n, setSegment = true;
      if (a == "--time-budget") o.timeBudget = *n, setBudget = true;
      if (a == "--repeats") o.repeats = int(*n), setRepeats = true;
      if (a == "--seed") o.seed = uint64_t(*n);
      if (a == "--experts") o.experts = int(*n);
      if (a == "--tp") o.tp = int(*n);
    }
  }
  if (o.help) return o;
  if (o.model.empty() == o.synthetic.empty()) return Error{"give either --model DIR or --synthetic flash|proxy"};
  if (!o.synthetic.empty() && o.synthetic != "flash" && o.synthetic != "proxy")
    return Error{fmt::format("--synthetic '{}': the synthetic models are 'flash' (V4.1-Flash, 40 layers) and 'proxy' "
                             "(7 layers at V4.1-Flash widths, 128 experts)",
                             o.synthetic)};
  if (o.experts > 0 && o.synthetic != "flash") return Error{"--experts applies to --synthetic flash only"};
  if (o.longContext == 0) {
    for (const auto& [set, flag] : {std::pair{setDecodeContexts, "--decode-contexts"}, {setSegment, "--segment"},
                                    {setBudget, "--time-budget"}})
      if (set) return Error{fmt::format("{} applies to --long-context only", flag)};
  } else {
    for (const auto& [set, flag] : {std::pair{setContexts, "--contexts"}, {setStreams, "--streams"},
                                    {o.quick, "--quick"}, {setPrompt, "--prompt"}, {setKv, "--kv-bytes"}})
      if (set)
        return Error{fmt::format("{} does not apply with --long-context (it sizes the KV cache for the context and "
                                 "measures one stream; see --decode-contexts)", flag)};
    o.speculative = false;
    const int64_t N = o.longContext, D = o.decodeTokens();
    if (o.segment % o.chunk != 0)
      return Error{fmt::format("--segment {} must be a multiple of --chunk {}", o.segment, o.chunk)};
    if (N < D + o.chunk)
      return Error{fmt::format("--long-context {} leaves no prefill: the decode measurement takes {} tokens (2 + "
                               "--repeats {} x --decode-steps {}) and one chunk is {}",
                               N, D, o.repeats, o.decodeSteps, o.chunk)};
    for (int64_t c : o.decodeContexts)
      if (c <= D || c >= N)
        return Error{fmt::format("--decode-contexts {}: each must be above the {} decode tokens and below "
                                 "--long-context {}", c, D, N)};
  }
  if (o.quick) {
    if (!setContexts) o.contexts = {2048, 8192};
    if (!setStreams) o.streams = {1, 4};
    if (!setSteps) o.decodeSteps = 8;
    if (!setRepeats) o.repeats = 1;
    if (!setPrompt) o.promptTokens = 128;
  }
  if (o.commit.empty()) {
    const char* env = std::getenv("DI_GIT_COMMIT");
    o.commit = env && *env ? env : "";
  }
  return o;
}

}  // namespace deepinfer::bench
