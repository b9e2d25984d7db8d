// kiln: numpy.linalg: solve, inv, det/slogdet, cholesky, qr, svd, eigh,
// lstsq, norms, matrix_rank, pinv.
//
// Every function takes float32 or float64 tensors of shape [..., m, n]: the
// leading axes are a batch (a loop over matrices; for two inputs they
// broadcast). Integer, bool and half inputs raise DTypeError (cast with
// .to(DType::float64) first: linalg picks no precision behind your back).
// Results have the inputs' promoted float dtype and are op-table rows
// (category Linalg), so they trace and compile; a decomposition with several
// outputs is one row per output (qr's q and r are two rows, each runs the
// factorization). Numerical failures raise ValueError naming the op and the
// matrix's flat (row-major) batch index:
//   "linalg_cholesky: matrix 3 of the batch is not positive-definite (leading minor 2)".
// Empty matrices give numpy's results (det of 0x0 is 1, svd's full factors of
// an m x 0 matrix are identities, lstsq with n == 0 or m == 0 gives zeros).
// CPU only: other devices raise the registry's DeviceError.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor.h"

namespace kiln::linalg {

/// x with a @ x == b. a: [..., n, n]; b: [..., n, k], or [n] (numpy 2: only a
/// 1-d b is a vector). Result [..., n, k] or [..., n]. ShapeError for
/// non-square a or mismatched rows; ValueError "matrix i is singular" when an
/// LU pivot is exactly 0 (LAPACK's getrf rule).
Tensor solve(const Tensor& a, const Tensor& b);
/// The inverse of each [..., n, n] matrix; ValueError when singular.
Tensor inv(const Tensor& a);
/// The determinant of each [..., n, n] matrix (from the LU factorization):
/// shape [...]. 0 for a singular matrix, 1 for 0 x 0.
Tensor det(const Tensor& a);

/// det == sign * exp(logabsdet), without overflow. sign is 0 and logabsdet
/// -inf for a singular matrix; both [...].
struct SlogDet {
  Tensor sign;
  Tensor logabsdet;
};
SlogDet slogdet(const Tensor& a);

/// The lower triangular l with l @ l^T == a (upper: u^T @ u == a) of each
/// symmetric positive-definite [..., n, n] matrix; reads only that triangle.
/// ValueError naming the matrix and the failing leading minor otherwise.
Tensor cholesky(const Tensor& a, bool upper = false);

/// q @ r == a, q with orthonormal columns, r upper triangular (Householder).
/// a: [..., m, n], K = min(m, n). reduced: q [..., m, K], r [..., K, n];
/// complete: q [..., m, m], r [..., m, n].
enum class QrMode { reduced, complete };
struct QR {
  Tensor q;
  Tensor r;
};
QR qr(const Tensor& a, QrMode mode = QrMode::reduced);

/// u @ diag(s) @ vh == a; s descending and >= 0, shape [..., K]. full_matrices
/// (numpy's default): u [..., m, m], vh [..., n, n]; else u [..., m, K], vh
/// [..., K, n]. ValueError for NaN/inf input.
struct SVD {
  Tensor u;
  Tensor s;
  Tensor vh;
};
SVD svd(const Tensor& a, bool full_matrices = true);
/// The singular values alone (descending, [..., K]); cheaper than svd().
Tensor svdvals(const Tensor& a);

/// Eigenvalues (ascending, [..., n]) and orthonormal eigenvectors (columns,
/// [..., n, n]) of symmetric matrices: v @ diag(w) @ v^T == a. uplo 'L'
/// (numpy's default) reads the lower triangle, 'U' the upper; ValueError for
/// another letter or NaN/inf input.
struct Eigh {
  Tensor eigenvalues;
  Tensor eigenvectors;
};
Eigh eigh(const Tensor& a, char uplo = 'L');
Tensor eigvalsh(const Tensor& a, char uplo = 'L');

/// The minimum-norm least-squares solution of a @ x ~= b (SVD, as numpy's
/// gelsd). a: [..., m, n]; b: [..., m, k] or [m]. Singular values at or below
/// rcond * s_max are treated as zero; rcond < 0 means eps * max(m, n)
/// (numpy's default). residuals: the squared 2-norm of b - a @ x per column
/// ([..., k] or [...]) when m > n, else an empty [0] tensor (numpy also
/// empties it when rank < n; kiln keeps it, so its shape does not depend on data);
/// rank: int64 [...]; singular_values: [..., min(m, n)].
struct Lstsq {
  Tensor solution;
  Tensor residuals;
  Tensor rank;
  Tensor singular_values;
};
Lstsq lstsq(const Tensor& a, const Tensor& b, double rcond = -1);

/// numpy.linalg.vector_norm: (sum |x|^ord)^(1/ord) over `axes` (empty: all
/// elements, the result 0-d unless keepdim). ord inf: max |x|, -inf: min |x|,
/// 0: the count of nonzeros; any other ord (1, 2, 0.5, ...) by the formula,
/// computed scaled by max |x| (min |x| for ord < 0) so that no power
/// overflows or underflows: a huge finite ord (1e308, even in float32 where
/// 1/ord rounds to 0) gives max |x|, the ord = inf limit (numpy overflows to
/// inf there). ValueError for inf/-inf over an empty set.
Tensor vector_norm(const Tensor& x, double ord = 2, const std::vector<int64_t>& axes = {}, bool keepdim = false);

/// numpy.linalg.matrix_norm over the two `axes` (rows, cols; default the last
/// two). ord "fro" (Frobenius) or "nuc" (sum of singular values).
Tensor matrix_norm(const Tensor& x, const char* ord = "fro", const std::vector<int64_t>& axes = {-2, -1},
                   bool keepdim = false);
/// Numeric ords: 1 / -1 (max / min column abs sum), inf / -inf (max / min
/// row abs sum), 2 / -2 (largest / smallest singular value). ValueError otherwise.
Tensor matrix_norm(const Tensor& x, double ord, const std::vector<int64_t>& axes = {-2, -1}, bool keepdim = false);

/// numpy.linalg.norm without ord: the 2-norm of the flattened x (axes
/// empty), of each vector (one axis) or Frobenius (two axes).
Tensor norm(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);

/// The number of singular values above tol (tol < 0: s_max * eps * max(m, n),
/// numpy's default); int64 [...].
Tensor matrix_rank(const Tensor& a, double tol = -1);
/// The pseudo-inverse [..., n, m] through the SVD; singular values at or
/// below rcond * s_max are dropped (rcond < 0: eps * max(m, n), numpy 2's rtol).
Tensor pinv(const Tensor& a, double rcond = -1);

}  // namespace kiln::linalg
