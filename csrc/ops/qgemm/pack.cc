// Integer GEMM packing (ops/qgemm/pack.h): SSE2 transposes for G = 4 and 2 (x86-64 baseline), plain loops
// otherwise, and the parallel row-sweep packing of a whole B.
#include "ops/qgemm/pack.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#if defined(__SSE2__)
#include <emmintrin.h>  // baseline of x86-64: the packing transposes
#endif

#include "core/buffer.h"
#include "core/isa.h"
#include "core/threadpool.h"

namespace nnkern {
namespace {

constexpr size_t kPackPrefetchGroups = 8;
constexpr size_t kPackSliceGroups = 8;


// Groups [g0, g1) of one MR x round_up(K, G) panel of B (channels n0 .. n0 + nn - 1 of a K x N row-major
// matrix) in the kernel's interleaved layout: dst[(p / G) * MR * G + i * G + p % G] = B[p, n0 + i], zero-padded
// (channels nn .. MR - 1, rows K .. round_up(K, G) - 1). 8-bit and s16w8 kernels: int8 from int8; s16 kernels:
// int16 from int8 (widened) or from int16. SSE2 transposes for G = 4 and 2, plain loops otherwise.
template <typename In, typename Out, int G>
void pack_groups_t(Out* dst, const In* b, size_t ldb, size_t K, size_t n0, size_t nn, size_t MR, size_t g0,
                   size_t g1) {
  size_t g = g0;
#if defined(__SSE2__)
  const size_t full_groups = std::min(g1, K / G);
  const size_t full_chunks = G == 4 || G == 2 ? nn / 16 : 0;
  const bool far_rows = ldb * sizeof(In) >= 2048;
  for (; g < full_groups && full_chunks; ++g) {
    const In* src = b + g * G * ldb + n0;
    Out* d = dst + g * MR * G;
    // Rows 2 KiB or more apart defeat the hardware prefetchers (at most 2 lines per page): fetch the
    // groups kPackPrefetchGroups ahead ourselves, every line of the strip (prefetches never fault); with rows
    // closer they only cost (docs/performance.md: "qgemm: packing B").
    if (far_rows && g + kPackPrefetchGroups < full_groups)
      for (size_t r = 0; r < size_t(G); ++r)
        for (size_t off = 0; off < nn * sizeof(In); off += 64)
          _mm_prefetch(reinterpret_cast<const char*>(src + (kPackPrefetchGroups * G + r) * ldb) + off, _MM_HINT_T0);
    for (size_t c = 0; c < full_chunks; ++c) {
      if constexpr (G != 4 && G != 2) {
        break;  // no transpose of this shape (unreachable: full_chunks == 0)
      } else if constexpr (G == 4) {  // 4 rows x 16 channels of int8 -> 16 lanes of 4 bytes
        const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * c));
        const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + ldb + 16 * c));
        const __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * ldb + 16 * c));
        const __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 3 * ldb + 16 * c));
        const __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
        const __m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
        __m128i* o = reinterpret_cast<__m128i*>(d + 64 * c);
        _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(lo01, lo23));
        _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(lo01, lo23));
        _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(hi01, hi23));
        _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(hi01, hi23));
      } else if constexpr (sizeof(Out) == 1) {  // 2 rows x 16 channels of int8 -> 16 lanes of 2 int8 (s16w8)
        const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * c));
        const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + ldb + 16 * c));
        __m128i* o = reinterpret_cast<__m128i*>(d + 32 * c);
        _mm_storeu_si128(o + 0, _mm_unpacklo_epi8(r0, r1));
        _mm_storeu_si128(o + 1, _mm_unpackhi_epi8(r0, r1));
      } else if constexpr (sizeof(In) == 1) {  // 2 rows x 16 channels of int8 -> 16 lanes of 2 int16
        const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * c));
        const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + ldb + 16 * c));
        const __m128i r0l = _mm_srai_epi16(_mm_unpacklo_epi8(r0, r0), 8), r0h = _mm_srai_epi16(_mm_unpackhi_epi8(r0, r0), 8);
        const __m128i r1l = _mm_srai_epi16(_mm_unpacklo_epi8(r1, r1), 8), r1h = _mm_srai_epi16(_mm_unpackhi_epi8(r1, r1), 8);
        __m128i* o = reinterpret_cast<__m128i*>(d + 32 * c);
        _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(r0l, r1l));
        _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(r0l, r1l));
        _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(r0h, r1h));
        _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(r0h, r1h));
      } else {  // 2 rows x 16 channels of int16
        const __m128i* s0 = reinterpret_cast<const __m128i*>(src + 16 * c);
        const __m128i* s1 = reinterpret_cast<const __m128i*>(src + ldb + 16 * c);
        __m128i* o = reinterpret_cast<__m128i*>(d + 32 * c);
        for (int h = 0; h < 2; ++h) {
          const __m128i r0 = _mm_loadu_si128(s0 + h), r1 = _mm_loadu_si128(s1 + h);
          _mm_storeu_si128(o + 2 * h, _mm_unpacklo_epi16(r0, r1));
          _mm_storeu_si128(o + 2 * h + 1, _mm_unpackhi_epi16(r0, r1));
        }
      }
    }
    for (size_t i = 16 * full_chunks; i < nn; ++i)
      for (size_t r = 0; r < size_t(G); ++r) d[i * G + r] = Out(src[r * ldb + i]);
    for (size_t i = nn * G; i < MR * G; ++i) d[i] = 0;
  }
#endif
  for (; g < g1; ++g) {
    Out* d = dst + g * MR * G;
    for (size_t i = 0; i < MR * G; ++i) d[i] = 0;
    for (size_t r = 0; r < size_t(G) && g * G + r < K; ++r) {
      const In* src = b + (g * G + r) * ldb + n0;
      for (size_t i = 0; i < nn; ++i) d[i * G + r] = Out(src[i]);
    }
  }
}

template <int G>
void pack_groups_g(const QGemmKernel& k, QType b_type, void* dst, const void* b, size_t ldb, size_t K, size_t n0,
                   size_t nn, size_t g0, size_t g1) {
  const size_t MR = size_t(k.mr);
  if (k.kind == QKind::s16w8 && b_type == QType::s16)
    throw std::invalid_argument(std::string(k.name) + " packs int8 weights, not int16 ones");
  if (k.kind != QKind::s16)
    pack_groups_t<int8_t, int8_t, G>(static_cast<int8_t*>(dst), static_cast<const int8_t*>(b), ldb, K, n0, nn, MR, g0, g1);
  else if (b_type == QType::s16)
    pack_groups_t<int16_t, int16_t, G>(static_cast<int16_t*>(dst), static_cast<const int16_t*>(b), ldb, K, n0, nn, MR, g0, g1);
  else
    pack_groups_t<int8_t, int16_t, G>(static_cast<int16_t*>(dst), static_cast<const int8_t*>(b), ldb, K, n0, nn, MR, g0, g1);
}

template <typename In>
void column_sums_t(uint32_t* cs, const In* b, size_t ldb, size_t p0, size_t p1, size_t n0, size_t nn) {
  for (size_t p = p0; p < p1; ++p) {
    const In* src = b + p * ldb + n0;
    for (size_t i = 0; i < nn; ++i) cs[i] += uint32_t(int32_t(src[i]));
  }
}

}  // namespace

void qgemm_pack_groups(const QGemmKernel& k, QType b_type, void* dst, const void* b, size_t ldb, size_t K, size_t n0,
                       size_t nn, size_t g0, size_t g1) {
  switch (k.kgroup) {
    case 1: return pack_groups_g<1>(k, b_type, dst, b, ldb, K, n0, nn, g0, g1);
    case 2: return pack_groups_g<2>(k, b_type, dst, b, ldb, K, n0, nn, g0, g1);
    case 4: return pack_groups_g<4>(k, b_type, dst, b, ldb, K, n0, nn, g0, g1);
    case 8: return pack_groups_g<8>(k, b_type, dst, b, ldb, K, n0, nn, g0, g1);
    default: throw std::logic_error(std::string("qgemm: no packing for the group size of ") + k.name);
  }
}

namespace {
// Element-wise sums down the panel's group rows (contiguous: widening adds the compiler vectorizes), then the
// G lanes of each channel added once at the end.
template <typename T, int G>
void panel_sums_t(const T* panel, size_t groups, size_t MR, uint32_t* cs) {
  uint32_t acc[64 * 8] = {};  // MR * G <= 64 * 8
  const size_t row = MR * G;
  for (size_t g = 0; g < groups; ++g, panel += row)
    for (size_t e = 0; e < row; ++e) acc[e] += uint32_t(int32_t(panel[e]));
  for (size_t i = 0; i < MR; ++i) {
    uint32_t s = 0;
    for (int r = 0; r < G; ++r) s += acc[i * G + r];
    cs[i] = s;
  }
}
}  // namespace

void qgemm_panel_column_sums(const QGemmKernel& k, const void* panel, size_t K, uint32_t* cs) {
  const size_t MR = size_t(k.mr), groups = ceil_div(K, size_t(k.kgroup));
  if (k.panel_sums) return k.panel_sums(panel, groups, cs);
  if (MR * size_t(k.kgroup) > 64 * 8)  // panel_sums_t's accumulators
    throw std::logic_error(std::string("qgemm: panel too wide for the column sums of ") + k.name);
  const bool s16 = k.kind == QKind::s16;
  switch (k.kgroup) {
    case 1: return s16 ? panel_sums_t<int16_t, 1>(static_cast<const int16_t*>(panel), groups, MR, cs)
                       : panel_sums_t<int8_t, 1>(static_cast<const int8_t*>(panel), groups, MR, cs);
    case 2: return s16 ? panel_sums_t<int16_t, 2>(static_cast<const int16_t*>(panel), groups, MR, cs)
                       : panel_sums_t<int8_t, 2>(static_cast<const int8_t*>(panel), groups, MR, cs);
    case 4: return s16 ? panel_sums_t<int16_t, 4>(static_cast<const int16_t*>(panel), groups, MR, cs)
                       : panel_sums_t<int8_t, 4>(static_cast<const int8_t*>(panel), groups, MR, cs);
    case 8: return s16 ? panel_sums_t<int16_t, 8>(static_cast<const int16_t*>(panel), groups, MR, cs)
                       : panel_sums_t<int8_t, 8>(static_cast<const int8_t*>(panel), groups, MR, cs);
    default: throw std::logic_error(std::string("qgemm: no column sums for the group size of ") + k.name);
  }
}

void qgemm_column_sums(QType b_type, uint32_t* cs, const void* b, size_t ldb, size_t p0, size_t p1, size_t n0,
                       size_t nn) {
  if (b_type == QType::s16) column_sums_t(cs, static_cast<const int16_t*>(b), ldb, p0, p1, n0, nn);
  else column_sums_t(cs, static_cast<const int8_t*>(b), ldb, p0, p1, n0, nn);
}

// Packs all of B (K x N) into panels, with the column sums (colsum != null, padded to the panels) — in
// sweeps down the rows (blocks of groups sized to stay in L2, one per task), never down single columns:
// a column-strip walk touches one page per row and misses the TLB on every row of a large B.
void qgemm_pack_all(const QGemmKernel& k, QType b_type, const void* b, size_t ldb, size_t K, size_t N,
                    uint8_t* packed, int32_t* colsum) {
  const size_t MR = size_t(k.mr), G = size_t(k.kgroup), groups = ceil_div(K, G);
  const size_t panels = ceil_div(N, MR), esz = b_type == QType::s16 ? 2 : 1;
  const size_t panel_bytes = MR * groups * G * qgemm_a_elem_size(k);
  const CpuFeatures& f = cpu_features();
  const size_t l2 = f.l2 ? f.l2 : 256 * 1024;
  const size_t gpt_cache = std::max<size_t>(1, (l2 / 4) / std::max<size_t>(G * N * esz, 1));
  const size_t gpt_threads = std::max<size_t>(1, ceil_div(groups, size_t(get_num_threads())));
  const size_t gpt = std::min(gpt_cache, gpt_threads), tasks = std::max<size_t>(1, ceil_div(groups, gpt));
  const size_t np = panels * MR;
  AlignedBuffer<uint32_t> partial(colsum ? tasks * np : 1);
  parallel_for(tasks, [&](size_t t) {
    const size_t g0 = t * gpt, g1 = std::min(groups, g0 + gpt);
    // Slices of row groups outer, panels inner: B is read along its rows (a slice of kPackSliceGroups
    // groups, one page at a time, stays in L1 while every panel takes its part), and each call packs a
    // slice, not a single group: per-group calls cost more than the packing (docs/performance.md: "qgemm:
    // packing B").
    for (size_t gs = g0; gs < g1; gs += kPackSliceGroups)
      for (size_t ip = 0; ip < panels; ++ip) {
        const size_t nn = std::min(MR, N - ip * MR);
        qgemm_pack_groups(k, b_type, packed + ip * panel_bytes, b, ldb, K, ip * MR, nn, gs,
                          std::min(g1, gs + kPackSliceGroups));
      }
    if (colsum) {
      uint32_t* cs = partial.data() + t * np;
      for (size_t i = 0; i < np; ++i) cs[i] = 0;
      qgemm_column_sums(b_type, cs, b, ldb, g0 * G, std::min(K, g1 * G), 0, N);
    }
  });
  if (colsum) {
    for (size_t i = 0; i < np; ++i) {
      uint32_t s = 0;
      for (size_t t = 0; t < tasks; ++t) s += partial.data()[t * np + i];
      colsum[i] = int32_t(s);
    }
  }
}

void qgemm_pack_gemm(const QGemmKernel& k, QType b_type, const void* b, size_t ldb, size_t K, size_t N,
                     uint8_t* packed, int32_t* colsum) {
  qgemm_pack_all(k, b_type, b, ldb, K, N, packed, colsum);
  const size_t slack = qgemm_panel_slack(k);
  std::memset(packed + qgemm_packed_gemm_bytes(k, K, N) - slack, 0, slack);
}

void qgemm_pack_panel_taps(const QGemmKernel& k, QType b_type, void* dst, const void* b, size_t ldb, size_t K,
                           size_t ks, size_t tap_stride, size_t n0, size_t nn, int32_t* colsum) {
  const size_t tap_bytes = qgemm_panel_bytes(k, K), groups = ceil_div(K, size_t(k.kgroup));
  const size_t esz = b_type == QType::s16 ? 2 : 1, MR = size_t(k.mr);
  uint32_t cs[64] = {};  // MR <= 64 (kQPadN)
  for (size_t t = 0; t < ks; ++t) {
    const void* bt = static_cast<const uint8_t*>(b) + t * tap_stride * esz;
    qgemm_pack_groups(k, b_type, static_cast<uint8_t*>(dst) + t * tap_bytes, bt, ldb, K, n0, nn, 0, groups);
    if (colsum) qgemm_column_sums(b_type, cs, bt, ldb, 0, K, n0, nn);
  }
  if (colsum)
    for (size_t i = 0; i < MR; ++i) colsum[i] = int32_t(cs[i]);
}

}  // namespace nnkern
