// kiln (internal): the CPU kernels of the Linalg category, templated on the
// compute type; linalg_kernels_f32.cpp / _f64.cpp instantiate one each (the
// Eigen decompositions of both in one file took over 2 GiB to compile).
// Through Eigen's dense
// decompositions (PartialPivLU, LLT, HouseholderQR, BDCSVD,
// SelfAdjointEigenSolver). Eigen over LAPACKE: it is already a required
// dependency, header-only, templated on float/double, and its
// decompositions expose what the error messages need (the LU pivots, the
// failing Cholesky). solve alone calls LAPACK's gesv when OpenBLAS is linked
// (the one row bench_ops2 times against LAPACK). The front end (tensor/ops_linalg.cpp) checked shapes
// and dtypes and passes every input as [batch..., rows, cols] (broadcast
// batch axes have stride 0) and a contiguous result of the same batch.
#pragma once
#include "linalg_kernels.h"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <Eigen/LU>
#include <Eigen/QR>
#include <Eigen/SVD>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "../../tensor/error.h"
#include "blas_threads.h"

namespace kiln::cpu::linalg_impl {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using RowMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// Element offset of matrix `b` (row-major flat batch index) of t.
inline int64_t batch_offset(const Tensor& t, int64_t b) {
  const int64_t nb = t.ndim() - 2;
  int64_t off = 0;
  for (int64_t i = nb - 1; i >= 0; --i) {
    const int64_t e = t.shape()[static_cast<size_t>(i)];
    off += (b % e) * t.strides()[static_cast<size_t>(i)];
    b /= e;
  }
  return off;
}

inline int64_t batch_count(const Tensor& t, int64_t matrix_axes) {
  int64_t c = 1;
  for (int64_t i = 0; i + matrix_axes < t.ndim(); ++i) c *= t.shape()[static_cast<size_t>(i)];
  return c;
}

// Matrix b of t (any strides; float32 or float64) converted to T.
template <class T, class S>
Mat<T> load_as(const Tensor& t, int64_t b) {
  const S* p = static_cast<const S*>(t.data_ptr()) + batch_offset(t, b);
  const int64_t r = t.shape()[t.ndim() - 2], c = t.shape()[t.ndim() - 1];
  const int64_t sr = t.strides()[t.ndim() - 2], sc = t.strides()[t.ndim() - 1];
  Mat<T> m(r, c);
  for (int64_t j = 0; j < c; ++j)
    for (int64_t i = 0; i < r; ++i) m(i, j) = static_cast<T>(p[i * sr + j * sc]);
  return m;
}
template <class T>
Mat<T> load(const Tensor& t, int64_t b) {
  return t.dtype() == DType::float64 ? load_as<T, double>(t, b) : load_as<T, float>(t, b);
}

// The contiguous result's matrix b as rows x cols (cols 1 for a vector).
template <class T>
RowMap<T> out_matrix(const Tensor& out, int64_t b, int64_t rows, int64_t cols) {
  return RowMap<T>(static_cast<T*>(out.data_ptr()) + b * rows * cols, rows, cols);
}

inline std::string matrix_of(const char* op, int64_t b) {
  return std::string(op) + ": matrix " + std::to_string(b) + " of the batch";
}

// LAPACK's getrf convention: singular when a pivot of U is exactly zero;
// returns its 1-based position, 0 when none.
template <class T>
int64_t zero_pivot(const Eigen::PartialPivLU<Mat<T>>& lu) {
  const auto d = lu.matrixLU().diagonal();
  for (int64_t i = 0; i < d.size(); ++i)
    if (d(i) == T(0)) return i + 1;
  return 0;
}

// p: the 1-based position of the zero pivot.
[[noreturn]] inline void throw_singular(const char* op, int64_t b, int64_t p) {
  throw ValueError(matrix_of(op, b) + " is singular (U[" + std::to_string(p - 1) + ", " + std::to_string(p - 1) +
                   "] of its LU factorization is 0)");
}

template <class T>
Eigen::PartialPivLU<Mat<T>> checked_lu(const Mat<T>& a, const char* op, int64_t b) {
  Eigen::PartialPivLU<Mat<T>> lu(a);
  if (int64_t p = zero_pivot<T>(lu)) throw_singular(op, b, p);
  return lu;
}

#if KILN_HAVE_OPENBLAS
// solve through OpenBLAS's LAPACK (Debian's libopenblas carries it): its
// blocked getrf is about 2.4x Eigen's PartialPivLU at 512 x 512 (bench_ops2).
// Same rule for singularity: info > 0 names the exactly-zero pivot.
extern "C" {
void sgesv_(const int* n, const int* nrhs, float* a, const int* lda, int* ipiv, float* b, const int* ldb, int* info);
void dgesv_(const int* n, const int* nrhs, double* a, const int* lda, int* ipiv, double* b, const int* ldb, int* info);
}
template <class T>
int gesv(int n, int nrhs, T* a, int* ipiv, T* b) {
  blas_one_thread();  // the bits must not depend on the thread count (blas_threads.h)
  int info = 0;
  if constexpr (std::is_same_v<T, double>) dgesv_(&n, &nrhs, a, &n, ipiv, b, &n, &info);
  else sgesv_(&n, &nrhs, a, &n, ipiv, b, &n, &info);
  return info;
}
#endif

// The order of the first leading minor that is not positive-definite (as
// LAPACK's potrf reports it). Definiteness of leading minors is monotone
// (a PD minor has PD minors), so a bisection over LLT's verdict finds it.
template <class T, int UpLo>
int64_t failing_minor(const Mat<T>& a) {
  int64_t lo = 0, hi = a.rows();  // minor lo is PD (0: trivially), minor hi is not
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    Eigen::LLT<Mat<T>, UpLo> llt(a.topLeftCorner(mid, mid));
    (llt.info() == Eigen::Success ? lo : hi) = mid;
  }
  return hi;
}

// Eigen's iterative decompositions (SVD, eigh) have no convergence
// guarantee on NaN/inf input; numpy raises LinAlgError there, kiln ValueError.
template <class T>
Mat<T> load_finite(const Tensor& t, int64_t b, const char* op) {
  Mat<T> m = load<T>(t, b);
  if (!m.allFinite()) throw ValueError(matrix_of(op, b) + " holds NaN or inf");
  return m;
}

template <class T>
void solve(const KernelArgs& k, int64_t batches) {
  const int64_t n = k.in[0].shape()[k.in[0].ndim() - 1], rhs = k.in[1].shape()[k.in[1].ndim() - 1];
  for (int64_t b = 0; b < batches; ++b) {
    if (n == 0) continue;
#if KILN_HAVE_OPENBLAS
    if (n <= std::numeric_limits<int>::max() && rhs <= std::numeric_limits<int>::max()) {
      Mat<T> lu = load<T>(k.in[0], b), x = load<T>(k.in[1], b);  // column-major, as LAPACK wants
      std::vector<int> piv(static_cast<size_t>(n));
      if (int info = gesv<T>(int(n), int(rhs), lu.data(), piv.data(), x.data()); info > 0)
        throw_singular("linalg_solve", b, info);
      out_matrix<T>(k.out, b, n, rhs) = x;
      continue;
    }
#endif
    const auto lu = checked_lu<T>(load<T>(k.in[0], b), "linalg_solve", b);
    out_matrix<T>(k.out, b, n, rhs) = lu.solve(load<T>(k.in[1], b));
  }
}

template <class T>
void lstsq(const KernelArgs& k, int64_t batches) {
  const int64_t m = k.in[0].shape()[k.in[0].ndim() - 2], n = k.in[0].shape()[k.in[0].ndim() - 1];
  const int64_t rhs = k.in[1].shape()[k.in[1].ndim() - 1];
  // numpy's default rcond: eps * max(m, n), relative to the largest singular value.
  const double rcond =
      k.attrs.scalar >= 0 ? k.attrs.scalar : std::numeric_limits<T>::epsilon() * static_cast<double>(std::max(m, n));
  for (int64_t b = 0; b < batches; ++b) {
    auto x = out_matrix<T>(k.out, b, n, rhs);
    if (m == 0 || n == 0) {  // numpy: the zero solution
      x.setZero();
      continue;
    }
    Eigen::BDCSVD<Mat<T>> svd(load_finite<T>(k.in[0], b, "linalg_lstsq"), Eigen::ComputeThinU | Eigen::ComputeThinV);
    svd.setThreshold(static_cast<T>(rcond));
    x = svd.solve(load<T>(k.in[1], b));
  }
}

template <class T>
void square(const KernelArgs& k, int64_t batches) {
  const Tensor& a = k.in[0];
  const int64_t n = a.shape()[a.ndim() - 1];
  for (int64_t b = 0; b < batches; ++b) {
    switch (k.op) {
      case OpId::LinalgInv:
        if (n) out_matrix<T>(k.out, b, n, n) = checked_lu<T>(load<T>(a, b), "linalg_inv", b).inverse();
        break;
      case OpId::LinalgDet:
        // Eigen's determinant: the product of U's pivots with the permutation's sign; 1 for 0 x 0.
        static_cast<T*>(k.out.data_ptr())[b] = n ? Eigen::PartialPivLU<Mat<T>>(load<T>(a, b)).determinant() : T(1);
        break;
      case OpId::LinalgSlogdet: {
        T sign = 1, logabs = 0;
        if (n) {
          Eigen::PartialPivLU<Mat<T>> lu(load<T>(a, b));
          sign = static_cast<T>(lu.permutationP().determinant());
          for (int64_t i = 0; i < n; ++i) {
            const T u = lu.matrixLU()(i, i);
            sign *= u > 0 ? T(1) : u < 0 ? T(-1) : T(0);
            logabs += std::log(std::abs(u));  // -inf for a zero pivot, as numpy
          }
          if (std::isnan(logabs)) sign = std::numeric_limits<T>::quiet_NaN();
        }
        static_cast<T*>(k.out.data_ptr())[b] = k.attrs.axis == 0 ? sign : logabs;
        break;
      }
      case OpId::LinalgCholesky: {
        if (n == 0) break;
        const Mat<T> m = load<T>(a, b);
        auto fail = [&](int64_t minor) {
          throw ValueError(matrix_of("linalg_cholesky", b) + " is not positive-definite (leading minor " +
                           std::to_string(minor) + ")");
        };
        auto out = out_matrix<T>(k.out, b, n, n);
        if (k.attrs.flag) {
          Eigen::LLT<Mat<T>, Eigen::Upper> llt(m);
          if (llt.info() != Eigen::Success || !llt.matrixLLT().allFinite()) fail(failing_minor<T, Eigen::Upper>(m));
          out = llt.matrixU();
        } else {
          Eigen::LLT<Mat<T>, Eigen::Lower> llt(m);
          if (llt.info() != Eigen::Success || !llt.matrixLLT().allFinite()) fail(failing_minor<T, Eigen::Lower>(m));
          out = llt.matrixL();
        }
        break;
      }
      case OpId::LinalgEigh: {
        if (n == 0) break;
        const Mat<T> m = load_finite<T>(a, b, "linalg_eigh");
        // numpy's UPLO: only the named triangle is read.
        const Mat<T> full = k.attrs.flag ? Mat<T>(m.template selfadjointView<Eigen::Upper>())
                                         : Mat<T>(m.template selfadjointView<Eigen::Lower>());
        const bool vectors = k.attrs.axis == 1;
        Eigen::SelfAdjointEigenSolver<Mat<T>> es(full, vectors ? Eigen::ComputeEigenvectors : Eigen::EigenvaluesOnly);
        if (es.info() != Eigen::Success)
          throw ValueError(matrix_of("linalg_eigh", b) + ": the eigenvalue iteration did not converge (NaN or inf input?)");
        if (vectors) out_matrix<T>(k.out, b, n, n) = es.eigenvectors();
        else out_matrix<T>(k.out, b, n, 1) = es.eigenvalues();  // ascending
        break;
      }
      default: break;
    }
  }
}

template <class T>
void qr(const KernelArgs& k, int64_t batches) {
  const Tensor& a = k.in[0];
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape()[a.ndim() - 1], kk = std::min(m, n);
  const bool complete = k.attrs.flag;
  const int64_t qc = complete ? m : kk, rr = complete ? m : kk;
  for (int64_t b = 0; b < batches; ++b) {
    Eigen::HouseholderQR<Mat<T>> f(load<T>(a, b));
    if (k.attrs.axis == 0) {
      out_matrix<T>(k.out, b, m, qc) = f.householderQ() * Mat<T>::Identity(m, qc);
    } else {
      auto r = out_matrix<T>(k.out, b, rr, n);
      r.setZero();
      r.topRows(kk) = f.matrixQR().topRows(kk).template triangularView<Eigen::Upper>();
    }
  }
}

template <class T>
void svd(const KernelArgs& k, int64_t batches) {
  const Tensor& a = k.in[0];
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape()[a.ndim() - 1], kk = std::min(m, n);
  const bool full = k.attrs.flag;
  const int64_t which = k.attrs.axis;
  const unsigned opts = which == 1 ? 0u
                        : which == 0 ? unsigned(full ? Eigen::ComputeFullU : Eigen::ComputeThinU)
                                     : unsigned(full ? Eigen::ComputeFullV : Eigen::ComputeThinV);
  for (int64_t b = 0; b < batches; ++b) {
    if (kk == 0) {  // numpy: identities for the full factors of an empty matrix
      if (which == 0) out_matrix<T>(k.out, b, m, full ? m : 0).setIdentity();
      if (which == 2) out_matrix<T>(k.out, b, full ? n : 0, n).setIdentity();
      continue;
    }
    Eigen::BDCSVD<Mat<T>> s(load_finite<T>(a, b, "linalg_svd"), opts);
    if (s.info() != Eigen::Success)
      throw ValueError(matrix_of("linalg_svd", b) + ": the SVD did not converge (NaN or inf input?)");
    if (which == 0) out_matrix<T>(k.out, b, m, full ? m : kk) = s.matrixU();
    else if (which == 1) out_matrix<T>(k.out, b, kk, 1) = s.singularValues();  // descending
    else out_matrix<T>(k.out, b, full ? n : kk, n) = s.matrixV().transpose();
  }
}

template <class T>
void dispatch(const KernelArgs& k) {
  const int64_t batches = batch_count(k.in[0], 2);
  switch (k.op) {
    case OpId::LinalgSolve: solve<T>(k, batches); break;
    case OpId::LinalgLstsq: lstsq<T>(k, batches); break;
    case OpId::LinalgQr: qr<T>(k, batches); break;
    case OpId::LinalgSvd: svd<T>(k, batches); break;
    default: square<T>(k, batches); break;
  }
}

}  // namespace kiln::cpu::linalg_impl
