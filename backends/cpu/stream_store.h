// kiln (internal): non-temporal ("streaming") output for the eager
// elementwise kernels on large contiguous outputs.
//
// An ordinary store to a line that is not in the cache first reads the line
// (read for ownership): y = a + b over arrays far larger than the caches
// moves 4 streams of bytes (a, b, y read, y written) where 3 are needed,
// y = f(x) 3 where 2 are needed. A non-temporal store writes whole lines
// straight to memory without reading them. For outputs that stay in the
// cache it is worse (the next op would read y back from memory), so the
// kernels stream only outputs of at least kStreamMinBytes (see there).
//
// How: the kernel computes a block of kStreamBlockBytes into an aligned
// buffer in L1 with its ordinary block function and copies the buffer out
// with streaming stores, so the computed values (and their bits) are those
// of the ordinary path; only where they are written from differs. The
// elements before the output's first 64-byte boundary and after its last
// whole line are computed and stored in place as usual.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define KILN_HAVE_STREAM_STORES 1
#else
#define KILN_HAVE_STREAM_STORES 0
#endif

namespace kiln::cpu::ew {

/// Output size (bytes of the whole op, all threads together) from which the
/// eager elementwise kernels write with streaming stores. Measured on the
/// project's machine (a 2-core Xeon VM: 2 MiB L2 per core, an L3 reported as
/// 260 MiB but shared with the rest of the host) with y = a + b on float32,
/// alone and followed by sum(y) (a consumer that reads y back), 1 and 2
/// threads: streaming is faster alone from 4-8 MiB outputs on, but with the
/// consumer it lost up to 11% at 16 MiB (2 threads: y streamed to memory
/// is read back from memory instead of the L3), tied at 32 MiB and won from
/// 64 MiB (the 16M-element rows of bench_ops). Below this the ordinary
/// stores, which leave y in the cache for the next op, are kept.
inline constexpr int64_t kStreamMinBytes = int64_t(32) << 20;

/// Elements computed per buffered block (4 KiB of float: stays in L1 with
/// the block's inputs).
inline constexpr int64_t kStreamBlockBytes = 4096;

/// Copies `bytes` (a multiple of 64) from `src` to `dst`, both 64-byte
/// aligned, with non-temporal stores. The caller issues stream_fence() once
/// after its last streamed block and before the data may be read by another
/// thread.
inline void stream_copy_lines(void* dst, const void* src, int64_t bytes) {
#if KILN_HAVE_STREAM_STORES
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  for (int64_t i = 0; i < bytes; i += 64) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_load_si512(s + i));
#elif defined(__AVX__)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), _mm256_load_si256(reinterpret_cast<const __m256i*>(s + i)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(s + i + 32)));
#else
    for (int j = 0; j < 64; j += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + j), _mm_load_si128(reinterpret_cast<const __m128i*>(s + i + j)));
#endif
  }
#else
  std::memcpy(dst, src, size_t(bytes));
#endif
}

/// Orders this thread's streaming stores before its later stores (so that a
/// thread joining it sees the data).
inline void stream_fence() {
#if KILN_HAVE_STREAM_STORES
  _mm_sfence();
#endif
}

/// Runs block(i0, m, out) over [0, n) where out points at the m outputs of
/// elements [i0, i0 + m): in place (ordinary stores) for the elements
/// before y's first 64-byte boundary and after its last whole 64-byte line,
/// into an aligned L1 buffer streamed to y for the lines in between. block
/// computes each element independently of where it is written (the callers'
/// block functions give a value's result independently of its position).
template <class O, class Block>
void stream_out(O* y, int64_t n, Block&& block) {
  static_assert(64 % sizeof(O) == 0, "stream_out: element size must divide a cache line");
  constexpr int64_t kLine = 64 / int64_t(sizeof(O));
  constexpr int64_t kBlk = kStreamBlockBytes / int64_t(sizeof(O));
  const uintptr_t addr = reinterpret_cast<uintptr_t>(y);
  if (addr % sizeof(O) != 0) {  // not element-aligned: no whole lines of elements
    block(int64_t(0), n, y);
    return;
  }
  int64_t head = int64_t((64 - addr % 64) % 64) / int64_t(sizeof(O));
  if (head > n) head = n;
  if (head) block(int64_t(0), head, y);
  const int64_t body_end = head + (n - head) / kLine * kLine;
  alignas(64) O buf[kBlk];
  for (int64_t i0 = head; i0 < body_end; i0 += kBlk) {
    const int64_t m = body_end - i0 < kBlk ? body_end - i0 : kBlk;
    block(i0, m, buf);
    stream_copy_lines(y + i0, buf, m * int64_t(sizeof(O)));
  }
  stream_fence();
  if (body_end < n) block(body_end, n - body_end, y + body_end);
}

}  // namespace kiln::cpu::ew
