// kiln tests: composite ops (einsum, conv1d, outer, trace, meshgrid, diff,
// clip, arange over floats, cumprod, logical ops, nonzero_static,
// unique_static) as a table. Each entry applies one op to fixed inputs
// (empty and size-1 extents, strided and negative-stride views, NaN and
// +-inf among them) and computes the expected results with explicit float64
// loops over the inputs' values, independent of kiln's ops.
// test_composite_table.cpp runs every entry eagerly and through
// kiln::compile and checks both against the reference and against each other.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kt::composite {

/// One expected result: dtype, shape and row-major values (NaN compares
/// equal to NaN, infinities exactly).
struct Ref {
  kiln::DType dtype;
  kiln::Shape shape;
  std::vector<double> values;
};

struct Entry {
  std::string name;
  std::vector<kiln::Tensor> inputs;
  /// Applies the op (through kiln's public functions) to the inputs.
  std::function<std::vector<kiln::Tensor>(const std::vector<kiln::Tensor>&)> build;
  /// The float64 reference, by loops over the inputs' values.
  std::function<std::vector<Ref>(const std::vector<kiln::Tensor>&)> reference;
  /// Tolerance against the reference: |got - want| <= atol + rtol |want|.
  double rtol = 0.0, atol = 0.0;
};

/// The table (built once per call; inputs are fresh tensors).
std::vector<Entry> entries();

}  // namespace kt::composite
