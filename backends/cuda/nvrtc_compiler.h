// kiln (internal): compiling generated CUDA C++ (the compiled plans'
// kernels, jit/cuda_lowering.h) with NVRTC, and launching what it gives.
// No GPU is needed to compile: without a device the target is sm_90.
// The source may `#include "kernel_templates.h"` (the kernel templates,
// built into kiln). Results are cached by a hash of (source, kernel
// templates text, architecture, options, NVRTC version): in process, and
// on disk in kernel_cache_dir(). Host C++ without CUDA headers; without the
// CUDA build every function throws NotBuiltError.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cuda {

/// ptxas's resource figures of one kernel of a cubin (-Xptxas=-v).
struct KernelResources {
  std::string name;
  int registers = 0;
  int spill_store_bytes = 0, spill_load_bytes = 0;
};

/// One compiled translation unit.
struct CompiledModule {
  std::string arch;          ///< "sm_90": what the image was built for
  bool is_cubin = true;      ///< false: PTX (compute_XY) for the driver to JIT
  std::vector<char> image;   ///< the cubin (ELF) or the PTX text, with its NUL
  std::vector<KernelResources> kernels;  ///< per kernel (cubin only)
  std::string log;           ///< NVRTC's log (ptxas -v lines included)
  uint64_t hash = 0;         ///< the cache key
  enum class From : uint8_t { compiled, memory, disk } from = From::compiled;
  /// The kernel named `name`'s figures; nullptr when absent.
  const KernelResources* resources(const std::string& name) const;
};

/// "sm_XY" of device `dev` when it exists, else "sm_90" (no GPU: tests).
std::string default_arch(int dev);

/// The disk cache folder: $KILN_CUDA_CACHE_DIR, else
/// $XDG_CACHE_HOME/kiln/cuda, else ~/.cache/kiln/cuda ("" disables it).
std::string kernel_cache_dir();

/// Compiles `source` for `arch` ("sm_90") to a cubin; if NVRTC cannot make
/// a cubin for it (an architecture newer than this NVRTC), to PTX for the
/// newest virtual architecture it knows. Looks in the in-process cache,
/// then the disk cache, first; stores into both. `dump` prints the source
/// to stderr. Throws ValueError with NVRTC's log when the source does not
/// compile.
std::shared_ptr<const CompiledModule> compile_module(const std::string& source, const std::string& arch,
                                                     bool dump = false);

/// Empties the in-process cache (tests measure disk hits with it).
void clear_module_memory_cache();

/// Launches kernel `name` of `module` on device `dev`'s kiln stream with
/// `args` (pointers to each argument's value, in order). The module is
/// loaded once per device (cudaLibraryLoadData). Throws DeviceError when
/// the device is absent or the launch fails.
void launch_kernel(const std::shared_ptr<const CompiledModule>& module, const std::string& name, int dev,
                   uint32_t grid, uint32_t block, uint32_t shared_bytes, void** args);

}  // namespace kiln::cuda
