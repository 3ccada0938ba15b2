#pragma once
// Each subcommand registers itself on the CLI11 app. Callbacks throw tessera::Error for
// user mistakes and bad files; main() prints it as one line and exits 1.
#include <CLI/CLI.hpp>

namespace tessera::cli {

void register_info(CLI::App& app);
void register_model_info(CLI::App& app);
void register_train(CLI::App& app);
void register_infer(CLI::App& app);
void register_eval(CLI::App& app);
void register_postprocess(CLI::App& app);
void register_bench(CLI::App& app);
/// `tessera export` and `tessera import`: weights exchange with Python (PyTorch).
void register_export(CLI::App& app);
/// `tessera plan`: the layout (tiling, pipeline stages, data parallelism) for a model, image and devices.
void register_plan(CLI::App& app);
/// `tessera simulate`: one pass of a layout on a described cluster (clusters/*.yaml).
void register_simulate(CLI::App& app);
/// `bench allreduce`, attached to the `bench` subcommand by register_bench.
void register_bench_allreduce(CLI::App& bench);
/// `bench train`: data-parallel training speed against PyTorch DDP (launches mpirun).
void register_bench_train(CLI::App& bench);
/// `bench simulate`: the cluster simulator's step times against this machine (launches mpirun).
void register_bench_simulate(CLI::App& bench);
/// `bench pipeline`: pipeline-parallel step time, bubble and stage memory, under mpirun.
void register_bench_pipeline(CLI::App& bench);
/// `bench spatial`: spatial parallelism's per-rank memory, step time and halo bytes (launches mpirun).
void register_bench_spatial(CLI::App& bench);
/// `bench dsn`: per-rank peak memory of domain-parallel DSN training for 1 + N domains (launches mpirun).
void register_bench_dsn(CLI::App& bench);
/// `bench compose`: per-rank memory of combined layouts beside each single mode's.
void register_bench_compose(CLI::App& bench);

/// The backends this binary was built with, e.g. "mpi cpu" or "mpi nccl cuda".
std::string build_summary();

}  // namespace tessera::cli
