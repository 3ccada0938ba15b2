#pragma once
// Internal to core: a DSN checkpoint when the domains are spread over several domain groups
// (parallel/modes/domain_hooks.hpp). A group's ranks hold only their domains' private encoders
// and those encoders' optimiser state, so the writer gathers them: the checkpoint it writes is
// the one-process layout — the U-Net, every domain's private encoder beside it (the extra
// module), the optimiser state over the whole DSN in one process's parameter order — and a
// resume hands each group its domains' parts back from it. Collectives go through
// TrainHooks::sum_domains (over the data and domain axes); each domain's part is read on its
// group's first replica. Training thread only.
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/optimizer.h>

#include "tessera/core/dsn.hpp"
#include "tessera/core/optim.hpp"
#include "tessera/core/train_hooks.hpp"

namespace tessera::detail {

/// 0 … total − 1.
std::vector<int> all_domains(int total);
/// Every parameter and buffer of `to` from the one of the same name in `from`.
void copy_module(const torch::nn::Module& from, torch::nn::Module& to);

/// Collective: every domain's string on every process, out of `total`; mine[k] is domain
/// local[k]'s (read on the first replica only, every replica holding the same).
std::vector<std::string> gather_domain_strings(const std::vector<std::string>& mine, const std::vector<int>& local,
                                               int total, TrainHooks& hooks);

/// The writer's copy of a DSN trained by several domain groups: every private encoder and an
/// optimiser over the whole DSN (the live U-Net's parameters, then the copy's parts), filled
/// from what each group's leader sends.
class GatheredDsn {
 public:
  /// Collective: `dsn` holds the private encoders of `local` (ascending) of its domains,
  /// `optimizer` (built from `options` over dsn's parameters) their state. Returns false on every
  /// process but the writer (hooks.writes_outputs()), which then holds the gathered copy.
  bool gather(DsnImpl& dsn, const std::vector<int>& local, torch::optim::Optimizer& optimizer,
              const OptimizerOptions& options, TrainHooks& hooks);
  const torch::nn::Module* parts() const { return parts_.get(); }
  torch::optim::Optimizer* optimizer() const { return optimizer_.get(); }

 private:
  DsnParts parts_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

/// On resume from the one-process layout at `path`: `dsn`'s private encoders (its owned
/// domains'), reconstruction decoder and classifier, and `optimizer`'s state for every
/// parameter of `dsn` (built from `options`). Throws tessera::Error("<path>: …").
void restore_dsn_parts(const std::string& path, DsnImpl& dsn, torch::optim::Optimizer& optimizer,
                       const OptimizerOptions& options);

}  // namespace tessera::detail
