#include "tessera/parallel/modes/sample_parallel.hpp"

#include <chrono>
#include <filesystem>

#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/core/fault_injection.hpp"
#include "tessera/run/run_layout.hpp"
#include "tessera/core/tensor_io.hpp"
#include "tessera/io/label_tiles.hpp"

namespace tessera::parallel {

namespace fs = std::filesystem;

void SampleParallelOptions::validate() const {
  if (run_dir.empty()) throw Error("--run-dir: required for sample-parallel inference (finished tiles go there)");
}

namespace {

// The pieces rank 0 finds missing or damaged in `dir` (every rank gets the same list).
std::vector<int64_t> pieces_to_do(const std::vector<Box>& insets, const std::string& dir, const ImageInfo& info,
                                  Communicator& group) {
  std::vector<int64_t> todo;
  if (group.rank() == 0) {
    for (const auto& e : fs::directory_iterator(dir))
      if (RunLayout::is_temporary(e.path().filename().string())) fs::remove_all(e.path());
    for (int64_t i = 0; i < int64_t(insets.size()); ++i)
      if (!io::label_tile_valid(io::label_tile_path(dir, info, i), info, insets[static_cast<size_t>(i)]))
        todo.push_back(i);
  }
  torch::Tensor count = torch::tensor({int64_t(todo.size())});
  group.broadcast(count, 0);
  torch::Tensor list = group.rank() == 0 ? torch::tensor(todo, torch::kLong) : torch::empty({count.item<int64_t>()}, torch::kLong);
  if (list.numel() > 0) group.broadcast(list, 0);
  return {list.data_ptr<int64_t>(), list.data_ptr<int64_t>() + list.numel()};
}

// The labels of one piece of work, gathered until it is whole: a tile arrives at once, a
// streamed band a few rows per strip (its labels, one byte a pixel, wait here).
class PieceLabels {
 public:
  /// Adds the rows `labels` (uint8, rows...) of `inset` in piece `index`; true when the piece is whole.
  bool add(int64_t index, const Box& inset, const Box& piece, torch::Tensor labels) {
    if (index != index_) {
      index_ = index;
      rows_.clear();
      count_ = 0;
    }
    TESSERA_CHECK(inset.origin[0] == piece.origin[0] + count_);
    rows_.push_back(std::move(labels));
    count_ += inset.size[0];
    return count_ == piece.size[0];
  }
  torch::Tensor whole() const { return rows_.size() == 1 ? rows_.front() : torch::cat(rows_, 0); }

 private:
  int64_t index_ = -1, count_ = 0;
  std::vector<torch::Tensor> rows_;
};

}  // namespace

SampleParallelReport infer_sample_parallel(UNet& net, const ImageSource& source, const Normalization& norm,
                                           const std::string& output, Communicator& group,
                                           const SampleParallelOptions& options,
                                           const std::function<void(int64_t)>& on_tile) {
  options.validate();
  options.inference.validate(net->options());
  const auto start = std::chrono::steady_clock::now();
  const ImageInfo& info = source.info();
  const std::vector<Box> insets = work_insets(net->options(), info.extent, options.inference);
  SampleParallelReport report;
  report.tiles = int64_t(insets.size());
  const TileSetLayout tile_set = RunLayout(options.run_dir).tile_set(output);
  report.tiles_dir = tile_set.dir();
  if (group.rank() == 0) {
    fs::create_directories(report.tiles_dir);
    // Before the first tile, so a viewer can place the tiles while they arrive.
    tile_set.write_record({fs::absolute(info.path).string(), fs::absolute(output).string(), report.tiles});
  }
  const std::vector<int64_t> todo = pieces_to_do(insets, report.tiles_dir, info, group);
  report.tiles_skipped = report.tiles - int64_t(todo.size());

  {
    auto counter = group.make_counter();
    auto queue = [&]() -> int64_t {
      const int64_t k = counter->fetch_add(1);
      return k < int64_t(todo.size()) ? todo[k] : -1;
    };
    InferenceOptions inference = options.inference;
    inference.progress = options.inference.progress && group.rank() == 0;
    PieceLabels piece;
    if (!todo.empty()) {
      const InferenceReport r = for_each_tile(
          net, source, norm, inference,
          [&](const Tile& t, const torch::Tensor& logits, const torch::Tensor& valid) {
            auto labels = logits.argmax(0).to(torch::kUInt8).masked_fill_(valid.logical_not(), int64_t{kNoDataLabel});
            const Box& whole = insets[static_cast<size_t>(t.index)];
            if (!piece.add(t.index, t.inset, whole, labels.cpu())) return;
            io::write_label_tile(io::label_tile_path(report.tiles_dir, info, t.index), info, whole,
                                 to_block_u8(piece.whole()));
            ++report.tiles_here;
            fault_point(FaultPoint::kTile, report.tiles_here);  // test hooks: TESSERA_TEST_HANG / _THROW
            if (on_tile) on_tile(report.tiles_here);
          },
          queue);
      report.recompute = r.recompute;
    }
    group.barrier();  // every tile is on disk
  }

  if (group.rank() == 0) {
    std::vector<std::string> paths;
    for (int64_t i = 0; i < report.tiles; ++i) paths.push_back(io::label_tile_path(report.tiles_dir, info, i));
    const std::string& into = options.assemble_into.empty() ? output : options.assemble_into;
    if (fs::path(into).has_parent_path()) fs::create_directories(fs::path(into).parent_path());
    io::assemble_label_tiles(paths, insets, into, info);
  }
  group.barrier();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace tessera::parallel
