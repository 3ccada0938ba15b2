#include "tessera/engine/train_settings.hpp"

#include <algorithm>
#include <map>

#include "tessera/core/error.hpp"
#include "tessera/engine/options_yaml.hpp"

namespace tessera::engine {
namespace {

void flatten(const YAML::Node& node, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  for (const auto& entry : node) {
    const std::string key = prefix + entry.first.as<std::string>();
    if (entry.second.IsMap()) {
      flatten(entry.second, key + ".", out);
    } else {
      YAML::Emitter e;
      e << YAML::Flow << entry.second;
      out.emplace_back(key, e.c_str());
    }
  }
}

// Settings only a pipeline uses, refused by the other modes.
const char* const kPipelineOnly = "it is a pipeline setting (parallel.pp > 1) and this run has no stages; leave it out";

// Pipelines and DSNs refuse batch norm, so no statistics to synchronise.
const RefusedSetting kSyncBatchNorm = {
    "train.sync_batch_norm", "it synchronises batch norm, which this mode refuses (use group or instance norm)"};

std::vector<RefusedSetting> pipeline_keys() {
  return {{"parallel.micro_batches", kPipelineOnly},
          {"parallel.schedule", kPipelineOnly},
          {"parallel.activation_checkpoint", kPipelineOnly}};
}

const RefusedSetting kSpatialMesh = {
    "parallel.sp_mesh", "it is a spatial setting (parallel.sp > 1) and this run splits no tiles; leave it out"};

// Every key below model.dsn (a key ending in '.' stands for the keys below it).
const RefusedSetting kDsnSizes = {
    "model.dsn.", "it sizes a Domain Separation Network (model.kind dsn) and this model is a U-Net; leave it out"};

std::vector<RefusedSetting> data_parallel_refusals() {
  std::vector<RefusedSetting> r = pipeline_keys();
  r.push_back(kSpatialMesh);
  r.push_back(kDsnSizes);
  return r;
}

// Stages and blocks sum their gradients in fp32, per stage or block, after the backward.
std::vector<RefusedSetting> stage_or_block_refusals(bool pipeline) {
  std::vector<RefusedSetting> r = {
      {"train.precision", "stages and blocks train in fp32 (bf16 mixed precision is for data parallelism only)"},
      {"parallel.fusion_mib",
       "stages and blocks sum their gradients in one packed allreduce after the backward, without buckets; leave it out"},
      {"parallel.overlap_allreduce",
       "stages and blocks sum their gradients after the backward, never during it; leave it out"},
      {"parallel.gradient_compression",
       "stages and blocks sum gradients in fp32 (16-bit gradients with error feedback are for data parallelism only); use none"},
  };
  r.push_back({"train.deep_supervision",
               "stages and blocks run the forward themselves, with the full-resolution loss only; leave it out"});
  if (!pipeline)
    for (RefusedSetting s : pipeline_keys()) r.push_back(std::move(s));
  if (pipeline) r.push_back(kSpatialMesh);
  if (pipeline) r.push_back(kSyncBatchNorm);
  r.push_back(kDsnSizes);
  return r;
}

std::vector<RefusedSetting> domain_refusals() {
  std::vector<RefusedSetting> r = {
      {"train.precision", "a DSN trains in fp32"},
      {"train.deep_supervision", "a DSN's task loss is its classifier's full-resolution output; leave it out"},
      {"parallel.gradient_compression", "a DSN sums its gradients in fp32; use none"},
      {"parallel.fusion_mib", "a DSN sums its shared gradients in one allreduce per step, without buckets; leave it out"},
      {"parallel.overlap_allreduce", "a DSN sums its shared gradients after the backward, never during it; leave it out"},
      {"parallel.micro_batches", "a DSN's pipeline micro-batches are its domains' batches, one each (the difference "
                                 "loss takes a domain's whole batch); leave it out"},
  };
  for (RefusedSetting s : pipeline_keys())
    if (s.key != "parallel.micro_batches") r.push_back(std::move(s));
  r.push_back(kSpatialMesh);
  r.push_back(kSyncBatchNorm);
  return r;
}

}  // namespace

std::string describe(TrainMode mode) {
  switch (mode) {
    case TrainMode::kData: return "data parallel training";
    case TrainMode::kPipeline: return "pipeline training (parallel.pp > 1)";
    case TrainMode::kSpatial: return "spatial training (parallel.sp > 1)";
    case TrainMode::kDomain: return "model.kind dsn";
  }
  return "?";
}

TrainMode train_mode(const RunConfig& c) {
  if (c.model.is_dsn()) return TrainMode::kDomain;
  if (c.parallel.pp > 1) return TrainMode::kPipeline;
  if (c.parallel.sp > 1) return TrainMode::kSpatial;
  return TrainMode::kData;
}

const std::vector<RefusedSetting>& refused_settings(TrainMode mode) {
  static const std::map<TrainMode, std::vector<RefusedSetting>> table = {
      {TrainMode::kData, data_parallel_refusals()},
      {TrainMode::kPipeline, stage_or_block_refusals(true)},
      {TrainMode::kSpatial, stage_or_block_refusals(false)},
      {TrainMode::kDomain, domain_refusals()},
  };
  return table.at(mode);
}

std::vector<std::pair<std::string, std::string>> setting_values(const RunConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten(to_yaml(c), "", out);
  return out;
}

const std::vector<RefusedSetting>& refused_for_rasters() {
  static const std::vector<RefusedSetting> keys = {
      {"data.resample.", "resampling is for volumes; rasters train on their own grid (leave data.resample out)"}};
  return keys;
}

std::vector<RefusedSetting> refused_settings(const RunConfig& c) {
  std::vector<RefusedSetting> r = refused_settings(train_mode(c));
  if (c.parallel.sp > 1)  // pipeline × spatial: the stages' tiles are split by the mesh
    std::erase_if(r, [](const RefusedSetting& s) { return s.key == kSpatialMesh.key; });
  if (c.model.is_dsn() && c.parallel.pp > 1)  // a DSN in pipeline stages: their schedule and checkpointing
    std::erase_if(r, [](const RefusedSetting& s) {
      return s.key == "parallel.schedule" || s.key == "parallel.activation_checkpoint";
    });
  if (c.data.dataset.empty())  // refused by the reader (run_config.cpp), before this table
    for (const char* key : {"data.validation", "data.fold", "data.folds"})
      r.push_back({key, "it chooses the validation cases of a data.dataset folder; validate pairs on data.holdout"});
  return r;
}

void refuse_unhonoured_settings(const RunConfig& c, const std::string& config) {
  const TrainMode mode = train_mode(c);
  const auto given = setting_values(c);
  const auto defaults = setting_values(RunConfig{});
  for (const RefusedSetting& s : refused_settings(c))
    for (const auto& [key, value] : given) {
      const bool below = s.key.back() == '.' && key.rfind(s.key, 0) == 0;
      if (key != s.key && !below) continue;
      const auto d = std::find_if(defaults.begin(), defaults.end(), [&](const auto& kv) { return kv.first == key; });
      if (d == defaults.end() || d->second != value)
        throw Error(config + ": " + key + " " + value + ": not honoured by " + describe(mode) + ": " + s.why);
    }
}

}  // namespace tessera::engine
