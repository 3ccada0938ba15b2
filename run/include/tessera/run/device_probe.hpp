#pragma once
// Reading this machine's devices, for telemetry: GPUs through NVML and the host through /proc.
// NVML is loaded at run time with dlopen("libnvidia-ml.so.1") — never linked — so a machine
// without an NVIDIA driver starts and reads its host; gpu_note() then says why no GPU is read.
// Figures follow the meaning of tessera/run/telemetry.hpp: memory in use on the device (all
// processes) of the device's total, utilisation of the whole device.
// Thread safe: one probe may be read from several threads. Torch-free, MPI-free.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace tessera {

/// One reading of one device.
struct DeviceReading {
  std::string name;             ///< GPU: NVML's product name ("gpu N" when NVML has none); host: "cpu"
  int64_t mem_used_bytes = 0;   ///< in use on the device, all processes, bytes
  int64_t mem_total_bytes = 0;  ///< the device's memory, bytes
  double util_pct = 0;          ///< busy, 0..100
  std::optional<double> temperature_c, power_w;  ///< GPU only, when NVML reports them
};

class DeviceProbe {
 public:
  /// With `use_gpus` false NVML is never loaded (a CPU rank); gpu_note() then says so.
  explicit DeviceProbe(bool use_gpus = true);
  ~DeviceProbe();
  DeviceProbe(const DeviceProbe&) = delete;
  DeviceProbe& operator=(const DeviceProbe&) = delete;

  /// Why no GPU can be read ("NVML not found (no NVIDIA driver)", ...); empty when NVML works.
  const std::string& gpu_note() const { return gpu_note_; }
  /// GPUs NVML sees; 0 without NVML.
  int gpu_count() const;
  /// GPU `index` (NVML's numbering); nullopt without NVML or when NVML cannot read it.
  std::optional<DeviceReading> read_gpu(int index) const;
  /// The host: memory in use (MemTotal − MemAvailable) of MemTotal, and the CPU busy share
  /// since the previous read_host() of this probe (or its construction); 0 when no time passed.
  DeviceReading read_host();

 private:
  struct Nvml;
  std::unique_ptr<Nvml> nvml_;  // null without NVML
  std::string gpu_note_;
  struct CpuTicks;
  std::unique_ptr<CpuTicks> cpu_;
};

/// This machine's host name.
std::string host_name();

}  // namespace tessera
