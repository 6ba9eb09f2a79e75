// The on-disk caches from Python: the kernel cache (list, verify, clear; BinaryCache.h) and the
// tuning files in it (every file's key and entries; TuningCache.h). Export and import of cache
// archives run the `deepinfer-jit cache` verb (the archive format lives in the tool).
#include <fmt/format.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <fstream>

#include "Bindings.h"
#include "deepinfer/BinaryCache.h"
#include "deepinfer/TuningCache.h"

namespace deepinfer::py {
namespace {

BinaryCache openCache(const std::string& dir) { return take(BinaryCache::open(dir.empty() ? BinaryCache::defaultDir() : dir)); }

nb::dict cacheList(const std::string& dir) {
  const BinaryCache c = openCache(dir);
  nb::list entries;
  for (const auto& e : c.list()) {
    nb::dict d;
    d["key"] = e.key;
    d["bytes"] = e.bytes;
    d["mtime"] = e.mtime;
    entries.append(d);
  }
  nb::dict out;
  out["dir"] = c.dir();
  out["entries"] = entries;
  out["tuning_files"] = TuningCache::listFiles(c.dir() + "/tuning");
  return out;
}

nb::dict timingDict(const CandidateTiming& t) {
  nb::dict d;
  d["median_us"] = t.medianUs;
  d["min_us"] = t.minUs;
  d["p90_us"] = t.p90Us;
  d["samples"] = t.samples;
  d["checked"] = t.checked;
  d["check_ok"] = t.checkOk;
  d["error"] = t.error;
  d["measured_at"] = t.measuredAt;
  return d;
}

// Every tuning file in <dir>/tuning: its key (GPU, driver, NVRTC, generator) and entries. A file
// that fails its checks is listed with the reason instead.
nb::list tuningFiles(const std::string& dir) {
  const BinaryCache c = openCache(dir);
  const std::string tdir = c.dir() + "/tuning";
  nb::list out;
  for (const auto& name : TuningCache::listFiles(tdir)) {
    nb::dict f;
    f["file"] = tdir + "/" + name;
    std::ifstream in(tdir + "/" + name, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    auto md = TuningCache::inspect(text);
    if (!md.ok()) {
      f["error"] = md.error().message;
      out.append(f);
      continue;
    }
    f["key"] = md->describe();
    f["gpu"] = md->gpuName;
    f["compute_capability"] = md->computeCapability;
    f["sm_count"] = md->smCount;
    f["driver"] = md->driverVersion;
    f["nvrtc"] = md->nvrtcVersion;
    f["generator"] = md->generatorVersion;
    std::vector<std::string> warnings;
    auto cache = TuningCache::open(*md, tdir, &warnings);
    if (!cache.ok()) {
      f["error"] = cache.error().message;
      out.append(f);
      continue;
    }
    nb::list entries;
    for (const auto& [k, e] : cache->entries()) {
      nb::dict d;
      d["target"] = k.target;
      d["op"] = k.op;
      d["dtypes"] = k.dtypes;
      d["bucket"] = k.bucket;
      d["shape"] = e.shape;
      d["default"] = e.defaultConfig;
      d["winner"] = e.winner;
      nb::dict timings;
      for (const auto& [cfg, t] : e.timings) timings[nb::str(cfg.c_str(), cfg.size())] = timingDict(t);
      d["timings"] = timings;
      entries.append(d);
    }
    f["entries"] = entries;
    f["roofline"] = nb::make_tuple(cache->roofline().copyGBs, cache->roofline().mmaTflops);
    f["warnings"] = warnings;
    out.append(f);
  }
  return out;
}

}  // namespace

void bindCache(nb::module_& m) {
  m.def("cache_default_dir", &BinaryCache::defaultDir);
  m.def("cache_list", &cacheList, nb::arg("dir"));
  m.def("cache_verify", [](const std::string& dir) { return openCache(dir).verify(); }, nb::arg("dir"));
  m.def("cache_clear", [](const std::string& dir) { return take(openCache(dir).clear()); }, nb::arg("dir"));
  m.def("tuning_files", &tuningFiles, nb::arg("dir"));
}

}  // namespace deepinfer::py
