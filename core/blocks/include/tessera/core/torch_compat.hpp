#pragma once
// LibTorch 1.13 (Debian's) … 2.x (a CUDA LibTorch, e.g. PyTorch's own): the few calls whose
// spelling changed between them, each behind one name here, chosen by <torch/version.h>. What
// else Tessera calls was checked to be spelled the same in both (docs/gpu.md, "LibTorch
// versions"). Include only where such a call is made: it pulls in ATen's autocast header.
#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

/// True when the LibTorch compiled against is at least major.minor.
#define TESSERA_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace tessera::torch_compat {

// Autocast state per device type. LibTorch 2.4 added is_autocast_enabled(DeviceType),
// set_autocast_enabled(DeviceType, bool), get/set_autocast_dtype(DeviceType, …) and made the
// per-backend spellings of 1.13 (is_enabled() for CUDA, is_cpu_enabled(), get_autocast_gpu_dtype(),
// …) deprecated: each call then warns at run time, on every forward.
inline bool autocast_enabled(c10::DeviceType device) {
#if TESSERA_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType device, bool on) {
#if TESSERA_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, on);
#else
  if (device == c10::DeviceType::CUDA) at::autocast::set_enabled(on);
  else at::autocast::set_cpu_enabled(on);
#endif
}

inline at::ScalarType autocast_dtype(c10::DeviceType device) {
#if TESSERA_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType device, at::ScalarType type) {
#if TESSERA_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, type);
#else
  if (device == c10::DeviceType::CUDA) at::autocast::set_autocast_gpu_dtype(type);
  else at::autocast::set_autocast_cpu_dtype(type);
#endif
}

// TF32 for float32 convolutions (cuDNN) and matrix products (cuBLAS). 2.9 added
// setFloat32Precision(backend, op, precision), whose argument types changed again after it; the
// two setters below exist in every version and set the same state (and refusing to mix old and
// new spellings within one process, 2.9+ is content when only these are used).
inline void allow_tf32(bool on) {
  at::globalContext().setAllowTF32CuDNN(on);
  at::globalContext().setAllowTF32CuBLAS(on);
}

}  // namespace tessera::torch_compat
