// A group of one rank: what a run without a launcher talks to.
#include <torch/torch.h>

#include "tessera/core/error.hpp"
#include "tessera/parallel/comm/communicator.hpp"

namespace tessera::parallel {
namespace {

class LocalCounter final : public SharedCounter {
 public:
  int64_t fetch_add(int64_t n) override {
    const int64_t v = value_;
    value_ += n;
    return v;
  }

 private:
  int64_t value_ = 0;
};

class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  void broadcast(torch::Tensor&, int) override {}
  void allreduce(torch::Tensor&, ReduceOp) override {}
  torch::Tensor allgather(const torch::Tensor& t) override { return t.unsqueeze(0).clone(); }
  torch::Tensor reduce_scatter(const torch::Tensor& t, ReduceOp) override { return t.clone(); }
  void send(const torch::Tensor&, int destination, int) override {
    throw Error("self: send to rank " + std::to_string(destination) + " in a one-rank group");
  }
  void recv(torch::Tensor&, int source, int) override {
    throw Error("self: recv from rank " + std::to_string(source) + " in a one-rank group");
  }
  void sendrecv(const torch::Tensor&, int destination, torch::Tensor&, int source, int) override {
    if (destination >= 0 || source >= 0)
      throw Error("self: sendrecv with rank " + std::to_string(std::max(destination, source)) + " in a one-rank group");
  }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) override { return std::make_unique<SelfCommunicator>(); }
  std::unique_ptr<SharedCounter> make_counter() override { return std::make_unique<LocalCounter>(); }
};

}  // namespace

std::unique_ptr<Communicator> make_self_communicator() { return std::make_unique<SelfCommunicator>(); }

std::string compiled_backends() {
  std::string s = TESSERA_HAVE_MPI ? "mpi" : "self";
#if TESSERA_HAVE_NCCL
  s += " nccl";
#endif
#if TESSERA_HAVE_CUDA
  s += " cuda";
#endif
  return s;
}

#if !TESSERA_HAVE_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, int) {
  throw Error("nccl: this build has no NCCL backend (configure with the CUDA toolkit and NCCL present)");
}
#endif

}  // namespace tessera::parallel
