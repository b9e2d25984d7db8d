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
  std::vector<std::string> options;  ///< the NVRTC options it was compiled with
  /// compiled: by NVRTC now; memory/disk: the caches; mef: a MEF file's
  /// CUBN section (adopt_module), no NVRTC run.
  enum class From : uint8_t { compiled, memory, disk, mef } from = From::compiled;
  /// The kernel named `name`'s figures; nullptr when absent.
  const KernelResources* resources(const std::string& name) const;
};

/// "sm_XY" of device `dev` when it exists, else "sm_90" (no GPU: tests).
std::string default_arch(int dev);

/// The disk cache folder: $KILN_CUDA_CACHE_DIR, else
/// $XDG_CACHE_HOME/kiln/cuda, else ~/.cache/kiln/cuda ("" disables it).
std::string kernel_cache_dir();

/// The NVRTC options of a module for `arch`: "-std=c++17",
/// "-default-device", "-arch=<arch>", "-Xptxas=-v", and in strict mode
/// "-fmad=false" (no multiply-add contraction anywhere in the module, so no
/// contraction across the ops of a fused group: each op rounds as its eager
/// kernel does). Without strict NVRTC's default -fmad=true applies.
std::vector<std::string> module_options(const std::string& arch, bool strict);

/// What a compiled module depends on besides its source, as one string:
/// the architecture, NVRTC's version, a hash of the kernel templates' text
/// and the options ("sm_90 nvrtc=12.4 templates=0123456789abcdef -std=c++17
/// ..."). A cubin stored under one key (a MEF's CUBN section) is valid for a
/// reader with the same key and the same source; "" without the CUDA build.
std::string module_feature_key(const std::string& arch, bool strict);

/// Compiles `source` for `arch` ("sm_90") to a cubin; if NVRTC cannot make
/// a cubin for it (an architecture newer than this NVRTC), to PTX for the
/// newest virtual architecture it knows. `strict`: see module_options.
/// Looks in the in-process cache, then the disk cache, first; stores into
/// both. `dump` prints the source to stderr. Throws ValueError with NVRTC's
/// log when the source does not compile.
std::shared_ptr<const CompiledModule> compile_module(const std::string& source, const std::string& arch,
                                                     bool dump = false, bool strict = false);

/// A module made elsewhere for this exact `source` under `feature_key`
/// (module_feature_key(arch, strict) of this process: the caller checked
/// it), adopted without running NVRTC: `image` is the cubin (or PTX, with
/// `is_cubin` false, built for `image_arch`), `kernels` its ptxas figures.
/// The result is marked From::mef and enters the in-process cache under
/// the hash compile_module would give.
std::shared_ptr<const CompiledModule> adopt_module(const std::string& source, const std::string& arch, bool strict,
                                                   const std::string& image_arch, bool is_cubin,
                                                   std::vector<char> image, std::vector<KernelResources> kernels);

/// The PTX NVRTC makes of `source` for the virtual architecture of `arch`
/// ("sm_90" -> compute_90) with module_options' semantics (strict:
/// -fmad=false); no cache. For tests and dumps: the instructions show
/// whether multiply-adds were contracted (fma.rn) or not (mul.rn, add.rn).
/// Throws ValueError with NVRTC's log when the source does not compile.
std::string compile_ptx(const std::string& source, const std::string& arch, bool strict);

/// NVRTC compilations run by this process so far (cache hits and adopted
/// modules do not count): tests check that reading a MEF skipped NVRTC.
int64_t nvrtc_compilations();

/// Empties the in-process cache (tests measure disk hits with it).
void clear_module_memory_cache();

/// Launches kernel `name` of `module` on device `dev`'s kiln stream with
/// `args` (pointers to each argument's value, in order). The module is
/// loaded once per device (cudaLibraryLoadData). Throws DeviceError when
/// the device is absent or the launch fails.
void launch_kernel(const std::shared_ptr<const CompiledModule>& module, const std::string& name, int dev,
                   uint32_t grid, uint32_t block, uint32_t shared_bytes, void** args);

}  // namespace kiln::cuda
