// kiln: the umbrella header. Light by design (no Eigen, asmjit or CUDA
// headers), so it parses fast in Cling/clang-repl. Eigen interop is in
// <kiln/eigen.h>. Not included here: the MEF format internals
// (<kiln/jit/mef.h>, encoders and test helpers; engine::read in jit/engine.h
// is the public loader), the code generator's headers, and the doctest
// integration <kiln/tensor/doctest_close.h> (it needs doctest).
#pragma once
#include "tensor/allocator.h"
#include "tensor/creation.h"
#include "tensor/einsum.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/mutation.h"
#include "tensor/op_table.h"
#include "tensor/ops.h"
#include "tensor/print_options.h"
#include "tensor/random.h"
#include "tensor/matrix_ops.h"
#include "tensor/runtime.h"
#include "tensor/sorting.h"
#include "tensor/tensor.h"
#include "tensor/testing.h"
#include "trace/graph.h"
#include "trace/realization_context.h"
#include "trace/pytree.h"
#include "trace/stage.h"
#include "trace/subgraph.h"
#include "nn/bert.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "jit/compiled_callable.h"
#include "jit/engine.h"
#include "jit/inference_session.h"
#include "jit/jit_function.h"
#include "io/csv.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "text/wordpiece.h"
#include "backends/cuda/cuda_backend.h"
