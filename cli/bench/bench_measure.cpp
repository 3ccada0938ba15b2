#include "bench_measure.hpp"

#include "tessera/run/process_memory.hpp"

namespace tessera::bench {

std::vector<int64_t> per_rank(parallel::Communicator& comm, int64_t mine) {
  torch::Tensor all = torch::zeros({comm.size()}, torch::kInt64);
  all[comm.rank()] = mine;
  comm.allreduce(all, parallel::ReduceOp::kSum);
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel());
}

int64_t training_state_bytes(const std::vector<torch::Tensor>& parameters, torch::optim::Adam& adam) {
  int64_t bytes = 0;
  for (const auto& p : parameters) bytes += int64_t(p.nbytes()) + (p.grad().defined() ? int64_t(p.grad().nbytes()) : 0);
  for (const auto& [key, state] : adam.state()) {
    const auto& a = static_cast<const torch::optim::AdamParamState&>(*state);
    bytes += int64_t(a.exp_avg().nbytes() + a.exp_avg_sq().nbytes());
    if (a.max_exp_avg_sq().defined()) bytes += int64_t(a.max_exp_avg_sq().nbytes());
  }
  return bytes;
}

void restore_mmap_threshold() { fix_mmap_threshold(32 << 20); }

}  // namespace tessera::bench
