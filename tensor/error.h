// kiln: the one exception hierarchy. Every user-facing failure is a kiln::Error
// whose message names the op or argument, what was expected and what came.
#pragma once
#include <stdexcept>
#include <string>

namespace kiln {

/// Root of every exception kiln throws on bad input or unsupported use.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// Shapes that do not broadcast, wrong rank, negative or overflowing sizes.
class ShapeError : public Error { using Error::Error; };
/// A dtype an op does not accept, or an invalid cast.
class DTypeError : public Error { using Error::Error; };
/// Tensors on different devices, or a device that is not built/present.
class DeviceError : public Error { using Error::Error; };
/// Out-of-range axis, index or slice bound.
class IndexError : public Error { using Error::Error; };
/// A value outside an op's domain (e.g. integer division by zero, empty max).
class ValueError : public Error { using Error::Error; };
/// Realizing a tensor where that is not possible (graph context, current context).
class RealizationError : public Error { using Error::Error; };
/// A failed check of results (assert_close in testing.h); the message is
/// the report of what differs.
class AssertionError : public Error { using Error::Error; };
/// A feature that this build of kiln does not include (e.g. CUDA not built).
class NotBuiltError : public Error { using Error::Error; };

}  // namespace kiln
