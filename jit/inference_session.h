// kiln: InferenceSession: compiles staged graphs and holds the options that
// apply to every callable it makes (threads, kernel options, MEF folders).
#pragma once
#include <memory>
#include <string>

namespace kiln {

/// Kernel options a session compiles with.
struct KernelOptions {
  /// Strict numerics: no FMA contraction across ops and only fusions whose
  /// results are bitwise what the eager kernels give, so compiled == eager
  /// bit for bit. Default: the per-op tolerances documented in jit/compiled_callable.h.
  bool strict = false;
  /// Fuse elementwise chains into generated machine code (off: every op
  /// runs its eager kernel; useful to bisect a numerics difference).
  bool fuse = true;
  /// Print the optimised graph, fusion groups and disassembly to stderr
  /// (also switched on by the environment variable KILN_JIT_DUMP=1).
  bool dump = false;
};

/// Compiles graphs and initialises models. One default session serves the
/// whole process; make your own to change options.
class InferenceSession {
 public:
  /// num_threads outside [0, 1024] throws ValueError.
  explicit InferenceSession(KernelOptions options = {}, int num_threads = 0);
  /// The process-wide session used when none is given.
  static std::shared_ptr<InferenceSession> default_session();

  const KernelOptions& options() const { return options_; }
  /// Threads for CPU kernels (0 = kiln's current setting, see set_num_threads).
  int num_threads() const { return num_threads_; }
  /// Folder of precompiled MEF files to reuse, and a folder to export into
  /// (used by the export issue; empty = none).
  std::string precompiled_mefs;
  std::string export_mefs;

 private:
  KernelOptions options_;
  int num_threads_ = 0;
};

}  // namespace kiln
