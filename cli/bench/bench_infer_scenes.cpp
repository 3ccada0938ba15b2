// tessera bench infer, the rows about memory and volumes: peak memory per scene (tiles, and the
// stream beside the footprint its memory model predicts: columns_footprint, tile_choice.hpp),
// and a CT volume streamed against `--tile auto` (time, peak memory, labels equal). The
// speed comparison itself: bench_infer.cpp.
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "bench_infer_parts.hpp"
#include "tessera/core/layer_sequence.hpp"
#include "tessera/core/memory_model.hpp"
#include "tessera/core/tile_choice.hpp"
#include "tessera/core/unet_spec.hpp"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;

// The strip height in infer's summary ("strips of 56 rows (…"), 0 when absent.
int64_t strip_of(const std::string& out) {
  const std::string field = summary_field(out, "strips of ");
  return field.empty() ? 0 : std::stoll(field.substr(std::string("strips of ").size()));
}

// The stream's row of one scene: its peak RSS, what infer predicted (the process's baseline
// and the footprint), and the footprint's parts for the strip it chose.
nlohmann::json stream_memory_row(const BenchInferOptions& f, const std::string& scene, const Index& extent,
                                 int threads) {
  const UNetOptions tiny = unet_preset("unet-tiny");
  const cli::ChildResult s = tessera_infer(f, scene, random_model("unet-tiny"), "stream", threads, "fp32", "memory.tif");
  const int64_t strip = strip_of(s.out);
  const int64_t columns = stream_columns(tiny, extent, threads);  // as infer chose them
  const int64_t groups = stream_groups(tiny, extent, columns);
  const Index group{extent[0], group_widths(tiny, extent, groups).front()};  // the widest: what is held at once
  const StreamFootprint fp = columns_footprint(tiny, group, strip, columns);
  std::string predicted = summary_field(s.out, "predicted ");
  if (!predicted.empty() && predicted.back() == ')') predicted.pop_back();
  std::printf("  %-30s %10.1f MiB  stream, strips of %lld rows in %lld column group(s) of %lld pieces, %.2f s; infer %s "
              "(its baseline + columns_footprint %.1f MiB = weights + %.1f x (carried %.1f + working %.1f + 2 windows of "
              "%.1f + logits %.1f))\n",
              "", s.peak_rss_mib, (long long)strip, (long long)groups, (long long)columns, s.seconds, predicted.c_str(),
              mib(fp.bytes), kStreamResidentFactor, mib(fp.carried), mib(fp.working), mib(fp.window), mib(fp.logits));
  return {{"stream_peak_rss_mib", s.peak_rss_mib}, {"stream_seconds", s.seconds}, {"strip", strip},
          {"stream_footprint_mib", mib(fp.bytes)}, {"carried_mib", mib(fp.carried)}, {"working_mib", mib(fp.working)},
          {"window_mib", mib(fp.window)}, {"columns", columns}, {"groups", groups}, {"infer_predicted", predicted}};
}

}  // namespace

void memory_rows(const BenchInferOptions& f, int threads, nlohmann::json& report) {
  std::printf("\npeak memory per scene (unet-tiny, random weights): tiles of %lld, and the stream beside its "
              "prediction\n",
              (long long)f.tile);
  nlohmann::json rows = nlohmann::json::array();
  double first = 0;
  for (const std::string& text : f.memory_scenes) {
    const Index extent = parse_extent("--memory-scenes", text);
    const std::string scene = bench_scene(f.work_dir, extent);
    const cli::ChildResult t =
        tessera_infer(f, scene, random_model("unet-tiny"), std::to_string(f.tile), threads, "fp32", "memory.tif");
    if (first == 0) first = t.peak_rss_mib;
    const std::string name = fmt::format("{} ({} wide, {} tall)", text, extent[1], extent[0]);
    std::printf("  %-30s %10.1f MiB  tiles, %.2f s (%.2fx the first scene's)\n", name.c_str(), t.peak_rss_mib, t.seconds,
                t.peak_rss_mib / first);
    nlohmann::json row{{"scene", text}, {"rows", extent[0]}, {"columns", extent[1]}, {"peak_rss_mib", t.peak_rss_mib},
                       {"seconds", t.seconds}};
    if (f.stream) row.update(stream_memory_row(f, scene, extent, threads));
    rows.push_back(row);
  }
  report["memory"] = rows;
}

void volume_rows(const BenchInferOptions& f, int threads, nlohmann::json& report) {
  const std::string ct = bench_ct(f.work_dir, f.volume);
  const std::vector<std::string> model = random_model(f.volume_model, 3);
  std::printf("\n%lld^3 CT, %s (random weights), %d interleaved runs (median (min-max)):\n", (long long)f.volume,
              f.volume_model.c_str(), f.runs);
  std::vector<double> seconds[2], rss[2];
  std::string out[2];
  const char* mode[2] = {"auto", "stream"};
  const std::string labels[2] = {"volume_tiles.nii.gz", "volume_stream.nii.gz"};
  for (int k = 0; k < f.runs; ++k)
    for (int m = 0; m < 2; ++m) {
      const cli::ChildResult r = tessera_infer(f, ct, model, mode[m], threads, "fp32", labels[m]);
      seconds[m].push_back(r.seconds);
      rss[m].push_back(r.peak_rss_mib);
      out[m] = r.out;
    }
  const auto [equal, total] =
      equal_labels((fs::path(f.work_dir) / labels[0]).string(), (fs::path(f.work_dir) / labels[1]).string());
  nlohmann::json rows;
  for (int m = 0; m < 2; ++m) {
    const std::string how = m == 0 ? summary_field(out[m], "tile ") : summary_field(out[m], "strips of ");
    std::printf("  %-22s %s s, peak RSS %s MiB, %s, %s\n", m == 0 ? "--tile auto" : "--mode stream",
                median_and_spread(seconds[m], 2).c_str(), median_and_spread(rss[m], 1).c_str(), how.c_str(),
                summary_field(out[m], "recompute ").c_str());
    rows[m == 0 ? "tiles" : "stream"] = {{"seconds", median_of(seconds[m])}, {"peak_rss_mib", median_of(rss[m])},
                                         {"runs_seconds", seconds[m]}, {"runs_peak_rss_mib", rss[m]}};
  }
  // Both are exact (probabilities within 1e-5 of one pass, tests/core/stream_inference_test.cpp),
  // summed in another order: a label may differ only where the top two probabilities tie that
  // closely (the 256³ run's six differences: margins 2e-7 to 5e-6, docs/streaming.md).
  std::printf("  labels equal: %lld of %lld voxels (%.4f%%)%s\n", (long long)equal, (long long)total,
              100.0 * double(equal) / double(total),
              equal < total ? "; exact both, so the others are argmax ties within float rounding (docs/streaming.md)" : "");
  rows.update({{"size", f.volume}, {"model", f.volume_model}, {"labels_equal", equal}, {"voxels", total}});
  report["volume"] = rows;
}

}  // namespace tessera::bench
