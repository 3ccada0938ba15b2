#include "tessera/run/run_writer.hpp"

#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "tessera/core/error.hpp"
#include "tessera/run/staged_file.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json or_null(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::optional<double> optional_number(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}

// metrics.jsonl of a resumed run: keeps the lines up to `step` (and drops lines cut by the
// kill), rewritten atomically.
void truncate_metrics(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      if (json::parse(line).value("step", int64_t{0}) > step) continue;
    } catch (const json::exception&) {
      continue;  // a line cut by the kill
    }
    kept += line;
    kept += '\n';
  }
  write_file_atomically(path, {kept});
}

// Keeps the newest `keep` step-NNNNNN.pt files.
void prune_step_checkpoints(const RunLayout& run, int keep) {
  const std::vector<std::string> files = run.step_checkpoints();
  for (size_t i = 0; i + keep < files.size(); ++i) {
    std::error_code ec;
    fs::remove(files[i], ec);
    if (ec) throw Error(files[i] + ": cannot remove an old step checkpoint: " + ec.message());
  }
}

}  // namespace

std::string metrics_line(const StepMetrics& m) {
  json j{{"step", m.step},
         {"epoch", m.epoch},
         {"loss", or_null(m.loss)},
         {"lr", m.lr},
         {"global_batch", m.global_batch},
         {"tile", m.tile},
         {"tiles_per_s", m.tiles_per_s},
         {"pixels_per_s", m.pixels_per_s},
         {"elapsed_s", m.elapsed_s}};
  if (m.grad_norm) j["grad_norm"] = *m.grad_norm;
  for (const auto& [name, value] : m.loss_terms) j["loss_terms"][name] = value;
  if (const std::optional<StepCommunication>& c = m.communication)
    j["communication"] = {{"buckets", c->buckets}, {"overlapped", c->overlapped}, {"busy_s", c->busy_s},
                          {"hidden_s", c->hidden_s}, {"exposed_s", c->exposed_s}};
  return j.dump();
}

std::string metrics_line(const ValidationMetrics& m) {
  json j{{"step", m.step}, {"epoch", m.epoch}, {"val_mean_dice", m.val_mean_dice}, {"best", m.best}};
  for (const auto& d : m.val_dice) j["val_dice"].push_back(or_null(d));
  return j.dump();
}

MetricsLog read_metrics(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": no metrics written");
  MetricsLog log;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      const json j = json::parse(line);
      if (j.contains("val_mean_dice")) {
        ValidationMetrics v;
        v.step = j.at("step");
        v.epoch = j.at("epoch");
        v.val_mean_dice = j.at("val_mean_dice");
        v.best = j.at("best");
        if (j.contains("val_dice"))
          for (const json& d : j.at("val_dice"))
            v.val_dice.push_back(d.is_null() ? std::nullopt : std::optional<double>(d.get<double>()));
        log.validations.push_back(std::move(v));
      } else {
        StepMetrics s;
        s.step = j.at("step");
        s.epoch = j.at("epoch");
        s.loss = optional_number(j, "loss");
        s.lr = j.at("lr");
        s.global_batch = j.at("global_batch");
        s.tile = j.at("tile");
        s.tiles_per_s = j.at("tiles_per_s");
        s.pixels_per_s = j.at("pixels_per_s");
        s.elapsed_s = j.at("elapsed_s");
        s.grad_norm = optional_number(j, "grad_norm");
        if (j.contains("loss_terms"))
          for (const auto& [name, value] : j.at("loss_terms").items()) s.loss_terms.emplace_back(name, value.get<double>());
        if (j.contains("communication")) {
          const json& c = j.at("communication");
          s.communication = StepCommunication{c.at("buckets"), c.at("overlapped"), c.at("busy_s"), c.at("hidden_s"),
                                              c.at("exposed_s")};
        }
        log.steps.push_back(s);
      }
    } catch (const json::exception&) {
      continue;  // a line cut by a kill
    }
  }
  return log;
}

void write_checkpoint_file(const std::string& path, std::string_view bytes) {
  try {
    write_file_atomically(path, {bytes});
  } catch (const Error& e) {
    // write_file_atomically says "<path>: cannot write: <reason>"; name what was written.
    const std::string message = e.what(), prefix = path + ": cannot write: ";
    if (message.rfind(prefix, 0) != 0) throw;
    throw Error(path + ": cannot write checkpoint: " + message.substr(prefix.size()));
  }
}

void RunWriter::on_begin(std::optional<int64_t> resumed_from) {
  const std::string checkpoints = layout_.checkpoints_dir();
  std::error_code ec;
  fs::create_directories(checkpoints, ec);
  if (ec) throw Error(checkpoints + ": cannot create the folder: " + ec.message());
  const std::string path = layout_.metrics();
  // A resumed run keeps the lines up to its step; a fresh one starts the file anew (a run
  // directory used again must not mix an earlier run's steps and validations into this one's).
  if (resumed_from) truncate_metrics(path, *resumed_from);
  metrics_.open(path, resumed_from ? std::ios::app : std::ios::trunc);
  if (!metrics_) throw Error(path + ": cannot open for writing");
}

void RunWriter::append(const std::string& line) {
  metrics_ << line << '\n';
  metrics_.flush();
}

void RunWriter::on_step(const StepMetrics& m) { append(metrics_line(m)); }

void RunWriter::on_validation(const ValidationMetrics& m) { append(metrics_line(m)); }

void RunWriter::on_checkpoint(const CheckpointBytes& c) {
  switch (c.kind) {
    case CheckpointKind::kLast:
      write_checkpoint_file(layout_.last_checkpoint(), c.bytes);
      break;
    case CheckpointKind::kBest:
      write_checkpoint_file(layout_.best_checkpoint(), c.bytes);
      break;
    case CheckpointKind::kStep:
      write_checkpoint_file(layout_.step_checkpoint(c.step), c.bytes);
      prune_step_checkpoints(layout_, c.keep);
      break;
  }
}

}  // namespace tessera
