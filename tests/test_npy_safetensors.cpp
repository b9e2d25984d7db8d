// numpy .npy and safetensors readers/writers (io/npy.*, io/safetensors.*).
#include "../io/npy.h"
#include "../io/safetensors.h"
#include "same_bits.h"
#include "test_util.h"

using namespace kiln;

namespace {

using kt::same_bits;

// A .npy file as numpy writes it (format 1.0), header padded with spaces and
// a final '\n' so that the data starts at a multiple of 64 bytes.
std::string npy_file(const std::string& dict, const std::string& data, char major = 1) {
  std::string h = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string f = std::string("\x93NUMPY", 6) + major + '\0';
  for (size_t i = 0; i < prefix - 8; ++i) f += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return f + h + data;
}

std::string le_bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

std::string npy_error(const std::string& bytes) {
  try {
    parse_npy(bytes, "x.npy");
  } catch (const IoError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string st_error(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "w.safetensors");
  } catch (const IoError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string st_file(const std::string& header, const std::string& data) {
  std::string f;
  for (int i = 0; i < 8; ++i) f += static_cast<char>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xff);
  return f + header + data;
}

}  // namespace

TEST_SUITE("npy_safetensors") {
  TEST_CASE(".npy: every dtype kiln has round-trips bit for bit, any layout written C-order") {
    for (DType d : kt::all_dtypes()) {
      if (d == DType::bfloat16) continue;
      for (const Shape& s : {Shape{}, Shape{0, 3}, Shape{5}, Shape{2, 3, 4}}) {
        Tensor t = kt::random_tensor(s, d, 3, true);
        Tensor back = parse_npy(encode_npy(t), "t");
        CHECK_MESSAGE(same_bits(t, back), name(d) << shape_str(s));
      }
    }
    Tensor m = kt::random_tensor({3, 4}, DType::float32, 1);
    Tensor back = parse_npy(encode_npy(transpose(m)));
    CHECK(back.shape() == Shape{4, 3});
    CHECK(same_bits(back, transpose(m)));
    // The header layout numpy uses: version 1.0, data 64-byte aligned.
    const std::string b = encode_npy(tensor({1.f, 2.f}));
    CHECK(b.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
    CHECK(b.size() == 128 + 8);
    CHECK(b.substr(10, 60) == "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }   ");
    CHECK(b[127] == '\n');
  }

  TEST_CASE(".npy: files as numpy writes them, Fortran order and format 2.0") {
    const int64_t v[6] = {1, 2, 3, 4, 5, 6};
    // numpy: np.array([[1, 2, 3], [4, 5, 6]], '<i8') saved C-order.
    Tensor c = parse_npy(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", le_bytes(v, 48)));
    CHECK(c.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
    // The same array stored Fortran-order: the bytes are column by column.
    const int64_t fv[6] = {1, 4, 2, 5, 3, 6};
    Tensor f = parse_npy(npy_file("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }", le_bytes(fv, 48), 2));
    CHECK(f.shape() == Shape{2, 3});
    CHECK(f.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
    const uint8_t bools[3] = {1, 0, 1};
    Tensor bt = parse_npy(npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", le_bytes(bools, 3)));
    CHECK(bt.dtype() == DType::bool_);
    CHECK(bt.to_vector<bool>() == std::vector<bool>{true, false, true});
    const float one = 1.f;
    Tensor z = parse_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", le_bytes(&one, 4)));
    CHECK(z.shape().empty());
    CHECK(z.item<float>() == 1.f);
  }

  TEST_CASE(".npy: each malformed file says what is wrong") {
    const float d3[3] = {1, 2, 3};
    const std::string ok = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", le_bytes(d3, 12));
    CHECK(npy_error(ok) == "(no error)");
    CHECK(npy_error("PK\x03\x04") == "read_npy: 'x.npy': not a .npy file (it does not start with \"\\x93NUMPY\")");
    std::string v9 = ok;
    v9[6] = 9;
    CHECK(npy_error(v9).find("format version 9.0 is not one kiln reads") != std::string::npos);
    CHECK(npy_error(ok.substr(0, 30)).find("the file is truncated: its header needs") != std::string::npos);
    CHECK(npy_error(ok.substr(0, ok.size() - 1)) ==
          "read_npy: 'x.npy': the file is truncated: shape [3] of <f4 needs 3 x 4 data bytes, the file has 11");
    CHECK(npy_error(ok + "x").find("the file has 1 bytes after the 12 data bytes") != std::string::npos);
    CHECK(npy_error(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", le_bytes(d3, 12)))
              .find("dtype '>f4' is big-endian") != std::string::npos);
    CHECK(npy_error(npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", le_bytes(d3, 12))) ==
          "read_npy: 'x.npy': dtype '<c8' is not one kiln has (it reads <f4 <f8 <f2 <i2 <i4 <i8 <u2 <u4 <u8 |u1 |i1 |b1)");
    CHECK(npy_error(npy_file("{'descr': '<f4', 'shape': (3,), }", le_bytes(d3, 12))) ==
          "read_npy: 'x.npy': the header lacks 'fortran_order'");
    CHECK(npy_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3,-1), }", ""))
              .find("malformed header at character") != std::string::npos);
    CHECK(npy_error(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", ""))
              .find("has too many elements") != std::string::npos);
    const uint8_t two = 2;
    CHECK(npy_error(npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }", le_bytes(&two, 1)))
              .find("bool element 0 is byte 2, not 0 or 1") != std::string::npos);
    CHECK_THROWS_WITH_AS(encode_npy(ones({2}, DType::bfloat16)), doctest::Contains("npy has no bfloat16 type"), IoError);
    CHECK_THROWS_WITH_AS(read_npy("/nonexistent/x.npy"), doctest::Contains("read_npy: cannot open '/nonexistent/x.npy'"),
                         IoError);
    // Every cut of a good file is an error, never a crash.
    for (size_t n = 0; n < ok.size(); ++n) CHECK(npy_error(ok.substr(0, n)) != "(no error)");
  }

  TEST_CASE("safetensors: every dtype round-trips bit for bit") {
    std::map<std::string, Tensor> m;
    for (DType d : kt::all_dtypes()) m["t_" + std::string(name(d))] = kt::random_tensor({2, 3}, d, 5, true);
    m["empty"] = zeros({0, 4});
    m["scalar"] = scalar(2.5f);
    const std::string b = encode_safetensors(m, {{"format", "pt"}});
    uint64_t hlen = 0;
    for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
    CHECK(hlen % 8 == 0);  // the data starts 8-byte aligned
    CHECK(b[8] == '{');
    auto back = parse_safetensors(b, "w");
    REQUIRE(back.size() == m.size());
    for (const auto& kv : m) CHECK_MESSAGE(same_bits(kv.second, back.at(kv.first)), kv.first);
  }

  TEST_CASE("safetensors: a file written to the spec by hand reads right") {
    const float w[4] = {1, 2, 3, 4};
    const int64_t idx[2] = {7, -1};
    std::string data = le_bytes(w, 16) + le_bytes(idx, 16);
    auto m = parse_safetensors(st_file("{\"__metadata__\":{\"format\":\"pt\"},"
                                       "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                                       "\"i\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[16,32]}}",
                                       data));
    REQUIRE(m.size() == 2);
    CHECK(m["w"].to_vector<float>() == std::vector<float>{1, 2, 3, 4});
    CHECK(m["w"].shape() == Shape{2, 2});
    CHECK(m["i"].to_vector<int64_t>() == std::vector<int64_t>{7, -1});
  }

  TEST_CASE("safetensors: each malformed file says what is wrong") {
    const float w[2] = {1, 2};
    const std::string data = le_bytes(w, 8);
    auto entry = [](const std::string& body) { return "{\"w\":{" + body + "}}"; };
    CHECK(st_error(st_file(entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]"), data)) == "(no error)");
    CHECK(st_error("abc").find("the file is truncated") != std::string::npos);
    CHECK(st_error(st_file("{}", "").substr(0, 9)).find("runs past the end of the file") != std::string::npos);
    CHECK(st_error(st_file("{\"w\":", data)).find("the header is not valid JSON") != std::string::npos);
    CHECK(st_error(st_file("[1,2]", data)) == "read_safetensors: 'w.safetensors': the header is JSON but not an object");
    CHECK(st_error(st_file(entry("\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]"), data)) ==
          "read_safetensors: 'w.safetensors': tensor 'w' has dtype F8_E4M3, which kiln does not have (it reads F32 "
          "F64 F16 BF16 I16 I32 I64 U8 U16 U32 U64 I8 BOOL)");
    CHECK(st_error(st_file(entry("\"dtype\":\"F32\",\"data_offsets\":[0,8]"), data)) ==
          "read_safetensors: 'w.safetensors': tensor 'w' has no 'shape'");
    CHECK(st_error(st_file(entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]"), data))
              .find("data_offsets [0, 16] lie outside the 8 data bytes (the file may be truncated)") != std::string::npos);
    CHECK(st_error(st_file(entry("\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]"), data))
              .find("shape [3] of F32 needs 3 x 4 bytes, data_offsets give 8") != std::string::npos);
    CHECK(st_error(st_file(entry("\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]"), data))
              .find("shape holds -2, not a non-negative integer") != std::string::npos);
    CHECK(st_error(st_file(entry("\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[3,4]"), data))
              .find("bool element 0 is not 0 or 1") != std::string::npos);
    CHECK_THROWS_WITH_AS(read_safetensors("/nonexistent/w.safetensors"),
                         doctest::Contains("read_safetensors: cannot open"), IoError);
    const std::string good = encode_safetensors({{"a", ones({3})}, {"b", zeros({2, 2}, DType::int32)}});
    for (size_t n = 0; n < good.size(); ++n) CHECK(st_error(good.substr(0, n)) != "(no error)");
  }

  TEST_CASE("safetensors: a name twice, overlapping offsets and bytes of no tensor are refused") {
    const float w[4] = {1, 2, 3, 4};
    const std::string d8 = le_bytes(w, 8), d12 = le_bytes(w, 12), d16 = le_bytes(w, 16);
    auto f32 = [](const std::string& name, int n, int begin) {
      return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + std::to_string(n) + "],\"data_offsets\":[" +
             std::to_string(begin) + "," + std::to_string(begin + 4 * n) + "]}";
    };
    auto obj = [](std::initializer_list<std::string> entries) {  // {"e1","e2",...}
      std::string h = "{";
      for (const std::string& e : entries) h += (h.size() > 1 ? "," : "") + e;
      return h + "}";
    };
    const std::string pre = "read_safetensors: 'w.safetensors': ";
    // Tiling exactly is fine, empty tensors included (at a boundary or the end).
    CHECK(st_error(st_file(obj({f32("a", 2, 0), f32("b", 2, 8)}), d16)) == "(no error)");
    CHECK(st_error(st_file(obj({f32("b", 2, 0), f32("a", 2, 8)}), d16)) == "(no error)");
    CHECK(st_error(st_file(obj({f32("a", 2, 0), f32("e", 0, 8), f32("b", 2, 8), f32("z", 0, 16)}), d16)) ==
          "(no error)");
    CHECK(st_error(st_file("{}", "")) == "(no error)");
    CHECK(st_error(st_file("{\"__metadata__\":{\"format\":\"pt\"}}", "")) == "(no error)");

    // Overlaps.
    CHECK(st_error(st_file(obj({f32("a", 2, 0), f32("b", 2, 4)}), d12)) ==
          pre + "the data_offsets of tensors 'a' [0, 8] and 'b' [4, 12] overlap (expected each tensor's bytes to "
                "follow the previous one's)");
    CHECK(st_error(st_file(obj({f32("a", 2, 0), f32("b", 2, 0)}), d8)) ==
          pre + "the data_offsets of tensors 'a' [0, 8] and 'b' [0, 8] overlap (expected each tensor's bytes to "
                "follow the previous one's)");
    CHECK(st_error(st_file(obj({f32("a", 2, 0), f32("e", 0, 4)}), d8))
              .find("tensors 'a' [0, 8] and 'e' [4, 4] overlap") != std::string::npos);
    // Gaps: before the first tensor, between two, after the last, data with no tensor.
    CHECK(st_error(st_file(obj({f32("a", 2, 4)}), d12)) ==
          pre + "data bytes [0, 4) before the first tensor, 'a' [4, 12], belong to no tensor (expected the first to "
                "start at 0)");
    CHECK(st_error(st_file(obj({f32("a", 1, 0), f32("b", 2, 8)}), d16)) ==
          pre + "data bytes [4, 8) between tensors 'a' [0, 4] and 'b' [8, 16] belong to no tensor (expected no gap)");
    CHECK(st_error(st_file(obj({f32("a", 2, 0)}), d12)) ==
          pre + "data bytes [8, 12) after the last tensor, 'a' [0, 8], belong to no tensor (expected the tensors to "
                "end at the end of the file)");
    CHECK(st_error(st_file("{\"__metadata__\":{}}", d8)) ==
          pre + "8 data bytes follow a header with no tensors (expected none)");

    // A key twice: JSON parsers keep one of the two, so the file is ambiguous.
    CHECK(st_error(st_file(obj({f32("w", 2, 0), f32("w", 2, 0)}), d8)) ==
          pre + "the header has tensor 'w' twice (expected each name once)");
    CHECK(st_error(st_file(obj({f32("w", 2, 0), f32("w", 2, 8)}), d16)) ==
          pre + "the header has tensor 'w' twice (expected each name once)");
    CHECK(st_error(st_file("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d8)) ==
          pre + "tensor 'w': key 'dtype' appears twice (expected each key once)");
    CHECK(st_error(st_file(obj({"\"__metadata__\":{}", "\"__metadata__\":{}", f32("w", 2, 0)}), d8)) ==
          pre + "the header has '__metadata__' twice");
    CHECK(st_error(st_file(obj({"\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}", f32("w", 2, 0)}), d8)) ==
          pre + "'__metadata__': key 'k' appears twice (expected each key once)");
    // The same key in different objects is no duplicate.
    CHECK(st_error(st_file(obj({"\"__metadata__\":{\"dtype\":\"x\"}", f32("dtype", 2, 0)}), d8)) == "(no error)");
    // What encode_safetensors writes always passes.
    const std::string good =
        encode_safetensors({{"a", ones({3})}, {"b", zeros({0})}, {"c", zeros({2, 2}, DType::int32)}});
    CHECK(st_error(good) == "(no error)");
    CHECK(st_error(good + "x").find("after the last tensor, 'c' [12, 28]") != std::string::npos);
  }
}

// Tester t17 F4: the readers read a file whole before checking it, so an
// endless one (/dev/zero; `kiln run --input /dev/zero`) ran until memory ran
// out. The magic / header length is now checked on the first bytes and only
// what the header declares is read; a file that is not regular is read at
// most one byte past that.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "../io/csv.h"

namespace {
std::string io_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_SUITE("npy_safetensors") {
  TEST_CASE("endless and huge malformed files are refused from their first bytes (tester t17 F4)") {
    if (std::filesystem::exists("/dev/zero")) {
      CHECK(io_error_of([] { read_npy("/dev/zero"); }) ==
            "read_npy: '/dev/zero': not a .npy file (it does not start with \"\\x93NUMPY\")");
      // eight zero bytes: a header length of 0, an empty header (not JSON)
      CHECK(io_error_of([] { read_safetensors("/dev/zero"); }).find("read_safetensors: '/dev/zero': the header is not valid JSON") == 0);
      const std::string csv = io_error_of([] { read_csv_dataset("/dev/zero", 1); });
      CHECK(csv == "read_csv_dataset: /dev/zero: byte 0 is a NUL byte: binary data, not CSV text (it is not a regular "
                   "file, so reading stops here)");
    }
    // a regular file whose 8 length bytes are garbage (0xff...): refused by
    // safetensors' header limit, not by reading 2^64 - 1 bytes first
    const std::string dir = (std::filesystem::temp_directory_path() / ("kiln_t17_f4_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir);
    const std::string garbage = dir + "/garbage.safetensors";
    {
      std::ofstream f(garbage, std::ios::binary);
      f << std::string(4096, '\xff');
    }
    CHECK(io_error_of([&] { read_safetensors(garbage); }) ==
          "read_safetensors: '" + garbage + "': the header length 18446744073709551615 is over safetensors' limit of "
          "100000000 bytes: not a safetensors file, or a corrupt one");
    // a FIFO (not a regular file): a right .npy through it reads right; one
    // with bytes past what its header declares is refused after one of them
    const float v[3] = {1.5f, -2.0f, 4.25f};
    const std::string npy = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", le_bytes(v, 12));
    const std::string fifo = dir + "/pipe.npy";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const auto old_pipe = std::signal(SIGPIPE, SIG_IGN);  // a reader that stops early: EPIPE, not a kill
    // `all` written into the FIFO by another thread while read_npy reads it
    auto through_fifo = [&](const std::string& all) {
      std::thread writer([&] {
        const int fd = ::open(fifo.c_str(), O_WRONLY);
        if (fd < 0) return;
        size_t at = 0;
        while (at < all.size()) {
          const ssize_t k = ::write(fd, all.data() + at, all.size() - at);
          if (k <= 0) break;  // the reader closed early (EPIPE is ignored below)
          at += static_cast<size_t>(k);
        }
        ::close(fd);
      });
      std::string err;
      Tensor t;
      try {
        t = read_npy(fifo);
      } catch (const IoError& e) {
        err = e.what();
      }
      writer.join();
      return std::make_pair(t, err);
    };
    {
      const auto [t, err] = through_fifo(npy);
      REQUIRE(err.empty());
      CHECK(t.to_vector<float>() == std::vector<float>{1.5f, -2.0f, 4.25f});
    }
    CHECK(through_fifo(npy + std::string(100, 'x')).second ==
          "read_npy: '" + fifo + "': more bytes follow the " + std::to_string(npy.size()) +
              " its header declares (it is not a regular file: a device or a stream that does not end?)");
    // a right header declaring float32[2^40] (4 TiB) through a FIFO: refused
    // at the header, not read until memory runs out (tester t18 N2)
    const std::string huge = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }",
                                      std::string(64, '\0'));
    CHECK(through_fifo(huge).second.find("read_npy: '" + fifo + "': its header declares 4398046511") == 0);
    std::signal(SIGPIPE, old_pipe);
    std::filesystem::remove_all(dir);
  }
}
