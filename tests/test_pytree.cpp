// Pytrees: flatten/unflatten over every supported container, static leaves, paths.
#include "test_util.h"

struct PtParams {
  kiln::Tensor w;
  kiln::Tensor b;
  int k = 0;
};
KILN_PYTREE(PtParams, w, b, k);

using namespace kiln;

TEST_SUITE("pytree") {
  TEST_CASE("flatten and unflatten round-trip nested containers") {
    Tensor a = tensor({1.f}), b = tensor({2.f}), c = tensor({3.f}), d = tensor({4.f});
    using Tree = std::tuple<Tensor, std::vector<Tensor>, std::map<std::string, Tensor>, std::optional<Tensor>,
                            std::pair<Tensor, int>, std::array<Tensor, 1>>;
    Tree t{a, {b, c}, {{"hi", d}, {"alpha", a}}, std::nullopt, {b, 7}, {c}};
    auto [leaves, def] = tree_flatten(t);
    REQUIRE(leaves.size() == 7);
    CHECK(leaves[0].is_same(a));
    CHECK(leaves[3].is_same(a));  // map keys sorted: alpha before hi
    CHECK(leaves[4].is_same(d));
    CHECK(def.num_leaves() == 7);
    CHECK(def.str() == "(T, [T, T], {alpha: T, hi: T}, None, (T, 7), (T,))");
    auto paths = def.leaf_paths();
    CHECK(paths == std::vector<std::string>{"0", "1.0", "1.1", "2.alpha", "2.hi", "4.0", "5.0"});
    Tree back = tree_unflatten<Tree>(def, leaves);
    CHECK(std::get<0>(back).is_same(a));
    CHECK(std::get<2>(back).at("hi").is_same(d));
    CHECK_FALSE(std::get<3>(back).has_value());
    CHECK(std::get<4>(back).second == 7);
  }

  TEST_CASE("static leaves are part of the TreeDef") {
    auto [l1, d1] = tree_flatten(std::make_tuple(tensor({1.f}), 3, std::string("x"), DType::int32));
    auto [l2, d2] = tree_flatten(std::make_tuple(tensor({1.f}), 4, std::string("x"), DType::int32));
    CHECK(l1.size() == 1);
    CHECK_FALSE(d1 == d2);
    CHECK(d1.str() == "(T, 3, \"x\", int32)");
  }

  TEST_CASE("user structs opt in with KILN_PYTREE") {
    PtParams p{tensor({1.f}), tensor({2.f}), 5};
    auto [leaves, def] = tree_flatten(p);
    CHECK(leaves.size() == 2);
    CHECK(def.str() == "PtParams{w: T, b: T, k: 5}");
    CHECK(def.leaf_paths() == std::vector<std::string>{"w", "b"});
    PtParams q = tree_unflatten<PtParams>(def, leaves);
    CHECK(q.k == 5);
    CHECK(q.b.is_same(p.b));
  }

  TEST_CASE("layout specs flatten to layouts") {
    auto [ls, def] = tree_flatten_layouts(std::make_tuple(TensorLayout(DType::float32, {2, 3}), zeros({4}, DType::int32)));
    REQUIRE(ls.size() == 2);
    CHECK(ls[0].shape == Shape{2, 3});
    CHECK(ls[1].dtype == DType::int32);
  }

  TEST_CASE("mismatched structure or leaf count is an error naming the path") {
    auto [leaves, def] = tree_flatten(std::make_tuple(tensor({1.f}), std::vector<Tensor>{tensor({2.f})}));
    using Wrong = std::tuple<Tensor, std::map<std::string, Tensor>>;
    CHECK_THROWS_WITH_AS(tree_unflatten<Wrong>(def, leaves), doctest::Contains("at '1': expected a dict"), ValueError);
    leaves.pop_back();
    using Right = std::tuple<Tensor, std::vector<Tensor>>;
    CHECK_THROWS_AS(tree_unflatten<Right>(def, leaves), ValueError);
  }

  TEST_CASE("str() escapes static strings and quotes odd keys, so each string's end shows") {
    // A static string holding quotes, a backslash and the printed form's own punctuation.
    auto [l1, d1] = tree_flatten(std::make_tuple(tensor({1.f}), std::string("a\"b\\c,{}:\"")));
    CHECK(d1.str() == "(T, \"a\\\"b\\\\c,{}:\\\"\")");  // printed: (T, "a\"b\\c,{}:\"")
    // Control bytes as \n, \t, \r or \xHH; bytes from 0x80 up (UTF-8) kept.
    auto [l2, d2] = tree_flatten(std::string("x\ny\tz\r\x01\x7f\xc3\xa9"));
    CHECK(d2.str() == "\"x\\ny\\tz\\r\\x01\\x7f\xc3\xa9\"");
    // Keys of letters, digits, _ - . stay bare; others are quoted and escaped.
    std::map<std::string, Tensor> m{{"layer.0_w-1", tensor({1.f})}, {"a, b: \"c\"", tensor({2.f})}, {"", tensor({3.f})}};
    auto [l3, d3] = tree_flatten(m);
    CHECK(d3.str() == "{\"\": T, \"a, b: \\\"c\\\"\": T, layer.0_w-1: T}");
    // Two trees that printed alike before now print differently.
    auto [l4, d4] = tree_flatten(std::make_tuple(std::string("a\", \"b"), std::string("c")));
    auto [l5, d5] = tree_flatten(std::make_tuple(std::string("a"), std::string("b"), std::string("c")));
    CHECK(d4.str() != d5.str());
    // Plain values print as before.
    auto [l6, d6] = tree_flatten(std::make_tuple(3, std::string("x"), DType::int32, true));
    CHECK(d6.str() == "(3, \"x\", int32, true)");
  }
}
