// Walks the whole op table: every row must be exercised by its category's
// checker against the float64 reference (see op_table_checks.h).
#include <cstring>
#include <optional>

#include "op_table_checks.h"
#include "test_util.h"

TEST_SUITE("op_table") {
  TEST_CASE("every op-table row is checked against the reference") {
    using namespace kiln;
    for (int i = 0; i < kNumOps; ++i) {
      const OpInfo& r = op_info(OpId(i));
      CAPTURE(r.name);
      int cases = 0;
      switch (r.category) {
        case OpCategory::Unary: cases = kt::check_unary_op(r.id); break;
        case OpCategory::Binary: cases = kt::check_binary_op(r.id); break;
        case OpCategory::Ternary: cases = kt::check_ternary_op(r.id); break;
        case OpCategory::Reduce: cases = kt::check_reduce_op(r.id); break;
        case OpCategory::Scan: cases = kt::check_scan_op(r.id); break;
        case OpCategory::RowNorm: cases = kt::check_rownorm_op(r.id); break;
        case OpCategory::Matmul: cases = kt::check_matmul_op(r.id); break;
        case OpCategory::View: cases = kt::check_view_op(r.id); break;
        case OpCategory::Data: cases = kt::check_data_op(r.id); break;
        case OpCategory::Linalg: cases = kt::check_linalg_op(r.id); break;
      }
      CHECK_MESSAGE(cases > 0, r.name << ": its checker compared no cases");
    }
  }

  TEST_CASE("op names round-trip and rows are in enum order") {
    using namespace kiln;
    for (int i = 0; i < kNumOps; ++i) {
      CHECK(static_cast<int>(op_info(OpId(i)).id) == i);
      CHECK(op_from_name(op_info(OpId(i)).name) == OpId(i));
    }
    CHECK_THROWS_AS(op_from_name("no_such_op"), kiln::ValueError);
  }
}

// ---- the `_` variants and out= overloads of every unary and binary row ---------------------
namespace {
using namespace kiln;
using UnaryInplace = const Tensor& (Tensor::*)() const;
using BinaryInplace = const Tensor& (Tensor::*)(const Tensor&) const;
using UnaryOut = Tensor (*)(const Tensor&, const Out&);
using BinaryOut = Tensor (*)(const Tensor&, const Tensor&, const Out&);
struct MutatingRow {
  OpId id;
  UnaryInplace unary = nullptr;
  BinaryInplace binary = nullptr;
  UnaryOut unary_out = nullptr;
  BinaryOut binary_out = nullptr;
};
// One entry per row the generator covers, built from ops.def as the library's are.
const std::vector<MutatingRow>& mutating_rows() {
  static const std::vector<MutatingRow> rows = {
#define KT_U(id, name) {OpId::id, &Tensor::name##_, nullptr, static_cast<UnaryOut>(&kiln::name), nullptr},
#define KT_B(id, name) \
  {OpId::id, nullptr, static_cast<BinaryInplace>(&Tensor::name##_), nullptr, static_cast<BinaryOut>(&kiln::name)},
#define KILN_OP(id, name, arity, cat, rule) KILN_FOR_ELEMENTWISE_ROW(KT_U, KT_B, id, name, cat, rule)
#include "../tensor/ops.def"
#undef KILN_OP
#undef KT_U
#undef KT_B
  };
  return rows;
}
bool bits_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), static_cast<size_t>(ca.numel()) * ca.itemsize()) == 0;
}
int kind_of(DType d) { return d == DType::bool_ ? 0 : is_floating(d) ? 2 : 1; }

// Runs write(dst) and checks it against the out-of-place value `want` (or
// the error computing it raised): equal bits after conversion to dst's dtype,
// a DTypeError when that conversion is not same_kind, and dst untouched on error.
template <class W>
int check_write(const Tensor& dst, const std::optional<Tensor>& want, bool want_threw, W&& write) {
  const Tensor before = dst.clone();
  if (want_threw) {
    CHECK_THROWS_AS(write(), kiln::Error);
    CHECK(bits_equal(dst, before));
    return 1;
  }
  if (kind_of(want->dtype()) > kind_of(dst.dtype())) {
    CHECK_THROWS_AS(write(), DTypeError);
    CHECK(bits_equal(dst, before));
    return 1;
  }
  write();
  CHECK_MESSAGE(bits_equal(dst, want->to(dst.dtype())), "dtype " << name(dst.dtype()));
  return 1;
}
}  // namespace

TEST_SUITE("op_table") {
  TEST_CASE("every unary and binary row has an in-place and an out= variant equal to it bit for bit") {
    using namespace kiln;
    // coverage: every unary row but cast, every binary row
    int expected = 0;
    for (int i = 0; i < kNumOps; ++i) {
      const OpInfo& r = op_info(OpId(i));
      expected += (r.category == OpCategory::Unary && r.id != OpId::Cast) || r.category == OpCategory::Binary;
    }
    CHECK(static_cast<int>(mutating_rows().size()) == expected);
    const kt::ViewKind kinds[] = {kt::ViewKind::contiguous, kt::ViewKind::transposed, kt::ViewKind::negative};
    for (const MutatingRow& row : mutating_rows()) {
      CAPTURE(op_name(row.id));
      int cases = 0;
      uint64_t seed = static_cast<uint64_t>(row.id) * 131;
      for (DType d : kt::all_dtypes()) {
        CAPTURE(name(d));
        for (kt::ViewKind k : kinds) {
          const Tensor x = kt::relayout(kt::random_tensor({3, 4}, d, ++seed, true), k);
          const Tensor y = kt::random_tensor({4}, d, ++seed, true);  // broadcasts over x's rows
          // out-of-place value, or the error it raises
          std::optional<Tensor> want;
          bool threw = false;
          try {
            want = row.unary ? apply(row.id, x).clone() : apply(row.id, x, y).clone();
          } catch (const Error&) {
            threw = true;
          }
          Tensor dst = kt::relayout(x.clone(), k);
          cases += check_write(dst, want, threw, [&] { return row.unary ? (dst.*row.unary)() : (dst.*row.binary)(y); });
          // out= into a destination of x's dtype and layout
          Tensor out = kt::relayout(zeros({3, 4}, d), k);
          cases += check_write(out, want, threw,
                               [&] { return row.unary ? row.unary_out(x, Out(out)) : row.binary_out(x, y, Out(out)); });
        }
        // Overlap: the destination is an operand (x op= x), and out= a shifted view of the input.
        const Tensor z = kt::random_tensor({7}, d, ++seed, true);
        {
          std::optional<Tensor> want;
          bool threw = false;
          try {
            want = row.unary ? apply(row.id, z).clone() : apply(row.id, z, z).clone();
          } catch (const Error&) {
            threw = true;
          }
          Tensor dst = z.clone();
          cases += check_write(dst, want, threw, [&] { return row.unary ? (dst.*row.unary)() : (dst.*row.binary)(dst); });
        }
        {
          Tensor buf = z.clone();
          const Tensor in = slice(buf, 0, 0, 6), out = slice(buf, 0, 1, 7);
          const Tensor other = slice(buf, 0, 1, 7);  // binary: the second operand is the destination itself
          std::optional<Tensor> want;
          bool threw = false;
          try {
            want = row.unary ? apply(row.id, in).clone() : apply(row.id, in, other).clone();
          } catch (const Error&) {
            threw = true;
          }
          cases += check_write(out, want, threw, [&] {
            return row.unary ? row.unary_out(in, Out(out)) : row.binary_out(in, other, Out(out));
          });
        }
      }
      CHECK(cases > 0);
    }
  }
}
