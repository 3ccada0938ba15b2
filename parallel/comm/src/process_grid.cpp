#include "tessera/parallel/comm/process_grid.hpp"

#include "tessera/core/error.hpp"

namespace tessera::parallel {

GridShape GridShape::resolved(int world_size) const {
  if (pipeline < 1) throw Error("--pp " + std::to_string(pipeline) + ": pipeline stages must be >= 1");
  if (spatial < 1) throw Error("--sp " + std::to_string(spatial) + ": spatial ranks must be >= 1");
  if (domain < 1) throw Error(std::to_string(domain) + " domain groups: must be >= 1");
  if (data < 0) throw Error("--dp " + std::to_string(data) + ": replicas must be >= 1 (or 0 for automatic)");
  GridShape s = *this;
  const std::string groups = domain > 1 ? " × " + std::to_string(domain) + " domain groups" : "";
  if (s.data == 0) {
    if (world_size % (pipeline * spatial * domain) != 0)
      throw Error("--pp " + std::to_string(pipeline) + " × --sp " + std::to_string(spatial) + groups +
                  " does not divide the world size " + std::to_string(world_size));
    s.data = world_size / (pipeline * spatial * domain);
  }
  const int ranks = s.data * s.pipeline * s.spatial * s.domain;
  if (ranks != world_size)
    throw Error("--dp " + std::to_string(s.data) + " × --pp " + std::to_string(s.pipeline) + " × --sp " +
                std::to_string(s.spatial) + groups + " = " + std::to_string(ranks) + " ranks, but the job has " +
                std::to_string(world_size));
  return s;
}

ProcessGrid::ProcessGrid(Communicator& world, GridShape shape) : world_(world), shape_(shape.resolved(world.size())) {
  const int w = world_.rank();
  s_ = w % shape_.spatial;
  p_ = (w / shape_.spatial) % shape_.pipeline;
  d_ = (w / (shape_.spatial * shape_.pipeline)) % shape_.data;
  g_ = w / (shape_.spatial * shape_.pipeline * shape_.data);
  const int D = shape_.data, K = shape_.pipeline, S = shape_.spatial;
  // Every rank makes the same four splits in the same order (they are collective).
  data_ = world_.split((g_ * K + p_) * S + s_, d_);
  pipeline_ = world_.split((g_ * D + d_) * S + s_, p_);
  spatial_ = world_.split((g_ * D + d_) * K + p_, s_);
  domain_ = world_.split((d_ * K + p_) * S + s_, g_);
}

int ProcessGrid::world_rank_of(int d, int p, int s) const {
  if (d < 0 || d >= shape_.data || p < 0 || p >= shape_.pipeline || s < 0 || s >= shape_.spatial) return -1;
  return ((g_ * shape_.data + d) * shape_.pipeline + p) * shape_.spatial + s;
}

std::string ProcessGrid::describe() const {
  return "grid " + std::to_string(world_size()) + " = data " + std::to_string(shape_.data) + " × pipeline " +
         std::to_string(shape_.pipeline) + " × spatial " + std::to_string(shape_.spatial) +
         (shape_.domain > 1 ? " × domain " + std::to_string(shape_.domain) : "");
}

}  // namespace tessera::parallel
