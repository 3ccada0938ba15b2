#pragma once
// The world's ranks arranged as domain × data × pipeline × spatial, each axis with its own
// group. World rank w = ((g · data + d) · pipeline + p) · spatial + s: the spatial axis varies
// fastest, so the ranks that exchange halos every convolution sit next to each other (same
// node); data replicas and domain groups, which talk once per step, are furthest apart.
//   domain group:   ranks with the same (d, p, s) — the shared parameters' gradients of a
//                   model of several domains (a DSN: core/dsn_training.hpp), each domain group
//                   training its own domains (parallel/modes/domain_hooks.hpp)
//   data group:     ranks with the same (g, p, s) — gradient allreduce
//   pipeline group: ranks with the same (g, d, s) — activations between stages
//   spatial group:  ranks with the same (g, d, p) — halo exchange
// A model of one domain has one domain group (domain = 1), and the grid is data × pipeline × spatial.
// Built once, collectively, on every rank; not copyable; queries are thread safe.
#include <memory>
#include <string>

#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {

struct GridShape {
  int data = 0;      ///< replicas; 0 = world size / (pipeline · spatial · domain)
  int pipeline = 1;  ///< pipeline stages
  int spatial = 1;   ///< ranks sharing one tile
  int domain = 1;    ///< domain groups (a DSN's domains dealt over them)

  GridShape& with_data(int v) { data = v; return *this; }
  GridShape& with_pipeline(int v) { pipeline = v; return *this; }
  GridShape& with_spatial(int v) { spatial = v; return *this; }
  GridShape& with_domain(int v) { domain = v; return *this; }

  /// The shape with `data` filled in. Throws tessera::Error naming the bad field when the
  /// sizes are not positive or their product is not `world_size`.
  GridShape resolved(int world_size) const;
};

class ProcessGrid {
 public:
  /// Collective over `world` (which must outlive the grid).
  ProcessGrid(Communicator& world, GridShape shape);
  ProcessGrid(const ProcessGrid&) = delete;
  ProcessGrid& operator=(const ProcessGrid&) = delete;

  const GridShape& shape() const { return shape_; }
  int world_rank() const { return world_.rank(); }
  int world_size() const { return world_.size(); }
  int data_rank() const { return d_; }        ///< replica index
  int pipeline_stage() const { return p_; }
  int spatial_rank() const { return s_; }
  int domain_group() const { return g_; }     ///< which domain group
  /// The rank that speaks for its replica (stage 0, spatial 0): it writes replicated state.
  bool is_replica_leader() const { return p_ == 0 && s_ == 0; }
  /// World rank 0: writes metrics and checkpoints.
  bool is_root() const { return world_.rank() == 0; }

  /// World rank of grid coordinate (d, p, s) in this rank's domain group; -1 outside the grid.
  int world_rank_of(int d, int p, int s) const;
  /// World ranks of the neighbouring pipeline stages; -1 at the ends.
  int previous_stage() const { return world_rank_of(d_, p_ - 1, s_); }
  int next_stage() const { return world_rank_of(d_, p_ + 1, s_); }
  /// World ranks of the spatial neighbours (the spatial axis splits one tile in a row); -1 at the border.
  int spatial_previous() const { return world_rank_of(d_, p_, s_ - 1); }
  int spatial_next() const { return world_rank_of(d_, p_, s_ + 1); }

  Communicator& world() const { return world_; }
  Communicator& data() const { return *data_; }
  Communicator& pipeline() const { return *pipeline_; }
  Communicator& spatial() const { return *spatial_; }
  Communicator& domain() const { return *domain_; }

  /// E.g. "grid 4 = data 2 × pipeline 1 × spatial 2" (" × domain G" when G > 1).
  std::string describe() const;

 private:
  Communicator& world_;
  GridShape shape_;
  int g_ = 0, d_ = 0, p_ = 0, s_ = 0;
  std::unique_ptr<Communicator> data_, pipeline_, spatial_, domain_;
};

}  // namespace tessera::parallel
