// Integer GEMM driver (seeds I1, I2, I6, I12, Q1, Q3). Kernel terms (kernels/qgemm.h): "m" runs along
// N (output channels, vector lanes), "n" along M (rows of A, broadcasts).
//
// Zero points never enter the inner loop. With a' = a + s and za' = za + s (s = 128 when int8
// activations are shifted to uint8 for vpdpbusd, seed I6; else 0):
//   sum_k (a - za)(b - zb) = sum_k a' b  +  [K za' zb[n] - za' colsum_b[n]]  -  zb[n] rowsum_a'[m]
// The bracket (col_comp) comes from B's column sums (computed when B is packed); the last term needs the
// row sums of A, computed in the pass that prepares A, only when some zb != 0. All int32 arithmetic is
// modulo 2^32, so the result is exact whenever the true value fits int32 (checked by the Python layer).
//
// Blocking: whole-K micro-kernels (seed Q3: no partial sums in memory, the epilogue runs on registers).
// Tasks are blocks of (channels x rows); within a task, each MR-channel panel of B (packed per task when
// B is not prepacked) is swept over the task's rows, which are sized to stay in L2.
#include "ops/qgemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#if defined(__SSE2__)
#include <emmintrin.h>  // baseline of x86-64: the packing transposes
#endif

#include "core/dispatch.h"
#include "core/threadpool.h"
#include "ops/gemm_tasks.h"

namespace nnkern {
namespace {

constexpr size_t kMaxNR = 16;
constexpr double kMinOpsPerThread = 4e6;

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
size_t round_up(size_t x, size_t m) { return ceil_div(x, m) * m; }

size_t a_elem_size(const QGemmKernel& k) { return k.kind == QKind::s16 ? 2 : 1; }

// Groups [g0, g1) of one MR x round_up(K, G) panel of B (channels n0 .. n0 + nn - 1 of a K x N row-major
// matrix) in the kernel's interleaved layout: dst[(p / G) * MR * G + i * G + p % G] = B[p, n0 + i], zero-padded
// (channels nn .. MR - 1, rows K .. round_up(K, G) - 1). 8-bit kernels: int8 from int8; s16 kernels: int16
// from int8 (widened) or from int16. SSE2 transposes for G = 4 and 2, plain loops otherwise.
template <typename In, typename Out, int G>
void pack_groups_t(Out* dst, const In* b, size_t ldb, size_t K, size_t n0, size_t nn, size_t MR, size_t g0,
                   size_t g1) {
  size_t g = g0;
#if defined(__SSE2__)
  const size_t full_groups = std::min(g1, K / G);
  const size_t full_chunks = G == 4 || G == 2 ? nn / 16 : 0;
  for (; g < full_groups && full_chunks; ++g) {
    const In* src = b + g * G * ldb + n0;
    Out* d = dst + g * MR * G;
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
  if (k.kind != QKind::s16)
    pack_groups_t<int8_t, int8_t, G>(static_cast<int8_t*>(dst), static_cast<const int8_t*>(b), ldb, K, n0, nn, MR, g0, g1);
  else if (b_type == QType::s16)
    pack_groups_t<int16_t, int16_t, G>(static_cast<int16_t*>(dst), static_cast<const int16_t*>(b), ldb, K, n0, nn, MR, g0, g1);
  else
    pack_groups_t<int8_t, int16_t, G>(static_cast<int16_t*>(dst), static_cast<const int8_t*>(b), ldb, K, n0, nn, MR, g0, g1);
}

void pack_groups(const QGemmKernel& k, QType b_type, void* dst, const void* b, size_t ldb, size_t K, size_t n0,
                 size_t nn, size_t g0, size_t g1) {
  switch (k.kgroup) {
    case 1: return pack_groups_g<1>(k, b_type, dst, b, ldb, K, n0, nn, g0, g1);
    case 2: return pack_groups_g<2>(k, b_type, dst, b, ldb, K, n0, nn, g0, g1);
    case 4: return pack_groups_g<4>(k, b_type, dst, b, ldb, K, n0, nn, g0, g1);
    case 8: return pack_groups_g<8>(k, b_type, dst, b, ldb, K, n0, nn, g0, g1);
    default: throw std::logic_error(std::string("qgemm: no packing for the group size of ") + k.name);
  }
}

// Column sums of rows [p0, p1) of B for channels n0 .. n0 + nn - 1, added into cs (modulo 2^32).
template <typename In>
void column_sums_t(uint32_t* cs, const In* b, size_t ldb, size_t p0, size_t p1, size_t n0, size_t nn) {
  for (size_t p = p0; p < p1; ++p) {
    const In* src = b + p * ldb + n0;
    for (size_t i = 0; i < nn; ++i) cs[i] += uint32_t(int32_t(src[i]));
  }
}

void column_sums(QType b_type, uint32_t* cs, const void* b, size_t ldb, size_t p0, size_t p1, size_t n0, size_t nn) {
  if (b_type == QType::s16) column_sums_t(cs, static_cast<const int16_t*>(b), ldb, p0, p1, n0, nn);
  else column_sums_t(cs, static_cast<const int8_t*>(b), ldb, p0, p1, n0, nn);
}

// Packs all of B (K x N) into panels, with the column sums (colsum != null, padded to the panels) — in
// sweeps down the rows (blocks of groups sized to stay in L2, one per task), never down single columns:
// a column-strip walk touches one page per row and misses the TLB on every row of a large B.
void pack_all(const QGemmKernel& k, QType b_type, const void* b, size_t ldb, size_t K, size_t N, uint8_t* packed,
              int32_t* colsum) {
  const size_t MR = size_t(k.mr), G = size_t(k.kgroup), groups = ceil_div(K, G);
  const size_t panels = ceil_div(N, MR), esz = b_type == QType::s16 ? 2 : 1;
  const size_t panel_bytes = MR * groups * G * a_elem_size(k);
  const CpuFeatures& f = cpu_features();
  const size_t l2 = f.l2 ? f.l2 : 256 * 1024;
  const size_t gpt_cache = std::max<size_t>(1, (l2 / 4) / std::max<size_t>(G * N * esz, 1));
  const size_t gpt_threads = std::max<size_t>(1, ceil_div(groups, size_t(get_num_threads())));
  const size_t gpt = std::min(gpt_cache, gpt_threads), tasks = std::max<size_t>(1, ceil_div(groups, gpt));
  const size_t np = panels * MR;
  AlignedBuffer<uint32_t> partial(colsum ? tasks * np : 1);
  parallel_for(tasks, [&](size_t t) {
    const size_t g0 = t * gpt, g1 = std::min(groups, g0 + gpt);
    // Row groups outer, panels inner: B is read along its rows (sequential, one page at a time).
    for (size_t g = g0; g < g1; ++g)
      for (size_t ip = 0; ip < panels; ++ip) {
        const size_t nn = std::min(MR, N - ip * MR);
        pack_groups(k, b_type, packed + ip * panel_bytes, b, ldb, K, ip * MR, nn, g, g + 1);
      }
    if (colsum) {
      uint32_t* cs = partial.data() + t * np;
      for (size_t i = 0; i < np; ++i) cs[i] = 0;
      column_sums(b_type, cs, b, ldb, g0 * G, std::min(K, g1 * G), 0, N);
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

struct Plan {
  const QGemmKernel* kern;
  size_t M, N, K;
  size_t kc;               // K block (a multiple of G); >= K: whole-K kernels
  // Broadcast side: row m of A as the kernel reads it.
  const uint8_t* a;
  size_t a_row_bytes;
  const int32_t* row_sum;  // [M] or null (no b zero point)
  int32_t za;              // effective (shifted) A zero point
  // Weights: packed panels + column sums ([N padded], or null when za == 0); or, with packed == null, the
  // raw K x N matrix, each task packing the panel it is about to use into an L1-sized buffer.
  const uint8_t* packed;
  const int32_t* colsum;
  QType b_type;
  const void* b;
  size_t ldb;
  const int32_t* b_zero;   // [N padded] or null
  QOut out;
  void* c;
  size_t ldc, c_elem;
  const float* scale;
  const float* bias;
  bool relu;
  float lo, hi;
};

void run_task(const Plan& P, size_t i0, size_t i1, size_t j0, size_t j1) {
  const QGemmKernel& k = *P.kern;
  const size_t MR = size_t(k.mr), NR = size_t(k.nr), G = size_t(k.kgroup), esz = a_elem_size(k);
  const size_t panel_bytes = MR * round_up(P.K, G) * esz;
  const size_t kc = P.kc < P.K ? P.kc : P.K;
  // Zero points: folded into column/row sums, or (QNNPACK-style kernels) subtracted by the kernel itself.
  const bool compensate = P.za != 0 && !k.zero_points_in_kernel;
  thread_local AlignedBuffer<int32_t> work;  // partial sums of the K blocks: rows j0..j1 x MR
  if (kc < P.K) work.resize(MR * (j1 - j0));
  alignas(64) int32_t comp[64];
  const void* bptr[kMaxNR];
  thread_local AlignedBuffer<uint8_t> panel_buf;
  if (!P.packed) panel_buf.resize(std::max<size_t>(panel_bytes, 1));
  alignas(64) uint32_t cs_local[64];
  for (size_t i = i0; i < i1; i += MR) {
    const size_t mi = std::min(MR, P.N - i);
    const uint8_t* panel;
    const int32_t* cs = P.colsum ? P.colsum + i : nullptr;
    if (P.packed) {
      panel = P.packed + (i / MR) * panel_bytes;
    } else {  // pack on first use: the panel is still in L1 when the kernel reads it
      pack_groups(k, P.b_type, panel_buf.data(), P.b, P.ldb, P.K, i, mi, 0, ceil_div(P.K, G));
      panel = panel_buf.data();
      if (compensate) {
        for (size_t ii = 0; ii < MR; ++ii) cs_local[ii] = 0;
        column_sums(P.b_type, cs_local, P.b, P.ldb, 0, P.K, i, mi);
        cs = reinterpret_cast<const int32_t*>(cs_local);
      }
    }
    QEpilogue ep;
    if (compensate) {
      const uint32_t kza = uint32_t(P.K) * uint32_t(P.za);
      for (size_t ii = 0; ii < MR; ++ii) {
        const uint32_t zb = P.b_zero && ii < mi ? uint32_t(P.b_zero[i + ii]) : 0u;
        comp[ii] = ii < mi ? int32_t(kza * zb - uint32_t(P.za) * uint32_t(cs[ii])) : 0;
      }
      ep.col_comp = comp;
    }
    if (k.zero_points_in_kernel) {
      ep.x_zero = P.za;
      ep.w_zero = P.b_zero ? P.b_zero + i : nullptr;
    } else {
      ep.b_zero = P.b_zero ? P.b_zero + i : nullptr;
    }
    ep.out = P.out;
    ep.relu = P.relu;
    ep.scale = P.scale ? P.scale + i : nullptr;
    ep.bias = P.bias ? P.bias + i : nullptr;
    ep.lo = P.lo;
    ep.hi = P.hi;
    // K blocks (seed Q3 keeps whole K where the panel fits L1; beyond, the MR x kc slice of the panel stays
    // in L1 while the task's rows stream past it, and the partial sums go through `work`, L2-resident).
    size_t k0 = 0;
    do {
      const size_t kk = std::min(kc, P.K - k0);
      const bool first = k0 == 0, last = k0 + kk >= P.K;
      QEpilogue e = last ? ep : QEpilogue{};  // earlier blocks: raw int32 partial sums...
      e.x_zero = ep.x_zero;                     // ...of the zero-point-subtracted products, if the kernel
      e.w_zero = ep.w_zero;                     // forms them
      const uint8_t* a = panel + (k0 / G) * MR * G * esz;
      for (size_t j = j0; j < j1; j += NR) {
        const size_t nj = std::min(NR, j1 - j);
        for (size_t jj = 0; jj < nj; ++jj) bptr[jj] = P.a + (j + jj) * P.a_row_bytes + k0 * esz;
        int32_t* w = work.data() + (j - j0) * MR;
        e.c_in = first ? nullptr : w;
        e.ld_in = MR;
        if (last) {
          e.row_sum = P.row_sum ? P.row_sum + j : nullptr;
          k.run(mi, nj, kk, a, bptr, static_cast<uint8_t*>(P.c) + (j * P.ldc + i) * P.c_elem, P.ldc, &e);
        } else {
          k.run(mi, nj, kk, a, bptr, w, MR, &e);
        }
      }
      k0 += kk;
    } while (k0 < P.K);
  }
}

std::atomic<size_t> g_kc_override{0};

// The K block: whole K while an MR x K panel fits half of L1d (seed Q3), else balanced blocks that do.
size_t choose_kc(const QGemmKernel& k, size_t K) {
  const size_t G = size_t(k.kgroup), ov = g_kc_override.load();
  if (ov) return round_up(ov, G);
  const CpuFeatures& f = cpu_features();
  const size_t l1 = f.l1d ? f.l1d : 32 * 1024;
  const size_t kc_max = std::max<size_t>(64, (l1 / 2) / (size_t(k.mr) * a_elem_size(k)) / G * G);
  if (K <= kc_max + kc_max / 2) return K;
  return round_up(ceil_div(K, ceil_div(K, kc_max)), G);
}

void execute(const Plan& P) {
  if (P.M == 0 || P.N == 0) return;
  const QGemmKernel& k = *P.kern;
  const CpuFeatures& f = cpu_features();
  const size_t l2 = f.l2 ? f.l2 : 256 * 1024;
  // Rows per block: the block of A (rows x K) stays in half of L2 while the panels sweep it.
  const size_t row_bytes = std::max<size_t>(P.K * a_elem_size(k), 1);
  const size_t rows_max = std::max<size_t>(size_t(k.nr), (l2 / 2) / row_bytes / size_t(k.nr) * size_t(k.nr));
  size_t mc, nc;
  const double ops = 2.0 * double(P.M) * double(P.N) * double(std::max<size_t>(P.K, 1));
  split_gemm_tasks(P.N, P.M, size_t(k.mr), size_t(k.nr), P.N, rows_max, ops, kMinOpsPerThread, &mc, &nc);
  const size_t tm = ceil_div(P.N, mc), tn = ceil_div(P.M, nc);
  if (tm * tn == 1) {
    run_task(P, 0, P.N, 0, P.M);
    return;
  }
  parallel_for(tm * tn, [&](size_t t) {
    const size_t bi = t % tm, bj = t / tm;
    run_task(P, bi * mc, std::min(P.N, (bi + 1) * mc), bj * nc, std::min(P.M, (bj + 1) * nc));
  });
}

// Prepares the broadcast operand: int8 activations shifted to uint8 for the u8s8 kernels (seed I6) and
// uint8 ones to int8 for the s8s8 kernels (x ^ 0x80 both ways), 8-bit activations widened to int16 for the
// s16 kernels, and the row sums (of the values the kernel reads) when a b zero point needs them.
// Returns the effective zero point.
int32_t prepare_a(const QGemmKernel& k, QType a_type, const void* a, size_t lda, size_t M, size_t K, int32_t za,
                  bool need_row_sums, AlignedBuffer<uint8_t>& buf, AlignedBuffer<int32_t>& sums, Plan* P) {
  const bool shift = (k.kind == QKind::u8s8 && a_type == QType::s8) || (k.kind == QKind::s8s8 && a_type == QType::u8);
  const bool widen = k.kind == QKind::s16 && a_type != QType::s16;
  const size_t esz = a_type == QType::s16 ? 2 : 1;
  if (!shift && !widen) {
    P->a = static_cast<const uint8_t*>(a);
    P->a_row_bytes = lda * esz;
  } else {
    const size_t out_esz = widen ? 2 : 1;
    buf.resize(std::max<size_t>(M * K * out_esz, 1));
    P->a = buf.data();
    P->a_row_bytes = K * out_esz;
  }
  if (need_row_sums) sums.resize(std::max<size_t>(M, 1));
  P->row_sum = need_row_sums ? sums.data() : nullptr;
  if (!shift && !widen && !need_row_sums) return za;
  uint8_t* out = buf.data();
  int32_t* rs = sums.data();
  const size_t chunk = std::max<size_t>(1, (1 << 16) / std::max<size_t>(K, 1));
  parallel_for(ceil_div(M, chunk), [&](size_t t) {
    for (size_t m = t * chunk; m < std::min(M, (t + 1) * chunk); ++m) {
      uint32_t s = 0;  // modulo 2^32
      if (a_type == QType::s16) {
        const int16_t* src = static_cast<const int16_t*>(a) + m * lda;
        for (size_t p = 0; p < K; ++p) s += uint32_t(int32_t(src[p]));
      } else if (shift) {
        const uint8_t* src = static_cast<const uint8_t*>(a) + m * lda;
        uint8_t* dst = out + m * K;
        if (k.kind == QKind::u8s8) {
          for (size_t p = 0; p < K; ++p) {
            dst[p] = uint8_t(src[p] ^ 0x80);
            s += dst[p];
          }
        } else {
          for (size_t p = 0; p < K; ++p) {
            dst[p] = uint8_t(src[p] ^ 0x80);
            s += uint32_t(int32_t(int8_t(dst[p])));
          }
        }
      } else if (widen) {
        int16_t* dst = reinterpret_cast<int16_t*>(out) + m * K;
        if (a_type == QType::u8) {
          const uint8_t* src = static_cast<const uint8_t*>(a) + m * lda;
          for (size_t p = 0; p < K; ++p) { dst[p] = src[p]; s += uint32_t(int32_t(src[p])); }
        } else {
          const int8_t* src = static_cast<const int8_t*>(a) + m * lda;
          for (size_t p = 0; p < K; ++p) { dst[p] = src[p]; s += uint32_t(int32_t(src[p])); }
        }
      } else if (a_type == QType::s8) {  // int8 as an s8s8 kernel reads it
        const int8_t* src = static_cast<const int8_t*>(a) + m * lda;
        for (size_t p = 0; p < K; ++p) s += uint32_t(int32_t(src[p]));
      } else {
        const uint8_t* src = static_cast<const uint8_t*>(a) + m * lda;
        for (size_t p = 0; p < K; ++p) s += uint32_t(int32_t(src[p]));
      }
      if (need_row_sums) rs[m] = int32_t(s);
    }
  });
  if (!shift) return za;
  return k.kind == QKind::u8s8 ? za + 128 : za - 128;
}

}  // namespace

const QGemmKernels* qgemm_kernels_for(Isa isa) {
  switch (isa) {
    case Isa::scalar: {
      static const QGemmKernels k{&u8s8_gemm_ref, &s16_gemm_ref};
      return &k;
    }
#ifdef NNKERN_HAVE_AVX2
    case Isa::avx2: {
      static const QGemmKernels k{nullptr, &s16_gemm_16x6__avx2};
      return &k;
    }
#endif
#ifdef NNKERN_HAVE_AVXVNNI
    case Isa::avxvnni: {
      static const QGemmKernels k{&u8s8_gemm_16x6__avxvnni, &s16_gemm_16x6__avxvnni};
      return &k;
    }
#endif
#ifdef NNKERN_HAVE_AVX512
    case Isa::avx512: {
      static const QGemmKernels k{nullptr, &s16_gemm_64x6__avx512};
      return &k;
    }
#endif
#ifdef NNKERN_HAVE_AVX512VNNI
    case Isa::avx512vnni: {
      static const QGemmKernels k{&u8s8_gemm_64x6__avx512vnni, &s16_gemm_64x6__avx512vnni, &u8s8_gemv__avx512vnni};
      return &k;
    }
#endif
#ifdef NNKERN_HAVE_NEON
    case Isa::neon: {
      static const QGemmKernels k{&u8_gemm_8x8__neon, &s16_gemm_8x8__neon};
      return &k;
    }
#endif
#ifdef NNKERN_HAVE_NEONDOT
    case Isa::neondot: {
      static const QGemmKernels k{&s8_gemm_8x8__neondot, &s16_gemm_8x8__neon};
      return &k;
    }
#endif
#ifdef NNKERN_HAVE_NEONI8MM
    case Isa::neoni8mm: {
      static const QGemmKernels k{&u8s8_gemm_8x8__neoni8mm, &s16_gemm_8x8__neon};
      return &k;
    }
#endif
    default: return nullptr;
  }
}

const QGemmKernels& qgemm_kernels() {
  static const KernelTable<QGemmKernels> table(qgemm_kernels_for);
  return table.get();
}

void set_qgemm_kc(size_t kc) { g_kc_override.store(kc); }

const QGemmKernel& qgemm_kernel(int bits) {
  const QGemmKernels& ks = qgemm_kernels();
  return bits == 8 && ks.i8 ? *ks.i8 : *ks.s16;
}

namespace {
[[maybe_unused]] const bool registered = (register_dispatched_op("u8s8_gemm", [] {
  const QGemmKernels& ks = qgemm_kernels();
  return ks.i8 ? std::string(ks.i8->name) : std::string(ks.s16->name) + " (int8 widened to int16)";
}), register_dispatched_op("s16_gemm", [] { return std::string(qgemm_kernel(16).name); }),
   register_dispatched_op("u8s8_gemv", [] {
     const QGemmKernels& ks = qgemm_kernels();
     return ks.gemv ? std::string(ks.gemv->name) : std::string("none (M <= 4 runs the packed GEMM)");
   }), true);
}  // namespace

void qgemm(const QgemmArgs& g) {
  if (g.M == 0 || g.N == 0) return;
  const int bits = g.b_type == QType::s16 ? 16 : 8;
  const QGemmKernel& k = qgemm_kernel(bits);
  Plan P{};
  P.kern = &k;
  P.M = g.M; P.N = g.N; P.K = g.K;
  // b zero points, padded to the panels (or null when all are zero).
  AlignedBuffer<int32_t> zb;
  bool any_zb = g.b_zero ? false : g.b_zero_scalar != 0;
  if (g.b_zero)
    for (size_t n = 0; n < g.N && !any_zb; ++n) any_zb = g.b_zero[n] != 0;
  if (any_zb) {
    const size_t np = qgemm_padded_n(g.N);
    zb.resize(np);
    for (size_t n = 0; n < np; ++n) zb.data()[n] = n < g.N ? (g.b_zero ? g.b_zero[n] : g.b_zero_scalar) : 0;
    P.b_zero = zb.data();
  }
  thread_local AlignedBuffer<uint8_t> abuf;
  thread_local AlignedBuffer<int32_t> sums;
  P.za = prepare_a(k, g.a_type, g.a, g.lda, g.M, g.K, g.a_zero, any_zb && !k.zero_points_in_kernel, abuf, sums, &P);
  const bool need_colsum = P.za != 0 && !k.zero_points_in_kernel;
  const QGemvKernel* gemv = qgemm_kernels().gemv;
  if (gemv && bits == 8 && k.kind == QKind::u8s8 && k.kgroup == 4 && g.M <= kQGemvMaxM) {
    // Small M: B straight from memory, read once (packing it would cost as much as the product).
    const size_t N = g.N, K = g.K, M = g.M;
    const double ops = 2.0 * double(M) * double(N) * double(std::max<size_t>(K, 1));
    const size_t threads = std::min(size_t(get_num_threads()), size_t(1) + size_t(ops / kMinOpsPerThread));
    const size_t chunk = round_up(ceil_div(N, std::max<size_t>(threads, 1)), 64);
    const int8_t* b = static_cast<const int8_t*>(g.b);
    const int32_t za = P.za;
    const int32_t* zbp = P.b_zero;
    const int32_t* rs = P.row_sum;
    const CpuFeatures& f = cpu_features();
    const size_t l2 = f.l2 ? f.l2 : 256 * 1024;
    auto task = [&](size_t t) {
      const size_t n0 = t * chunk, nn = std::min(chunk, N - n0);
      thread_local AlignedBuffer<int32_t> colsum;
      colsum.resize(std::max<size_t>(nn, 1));
      int32_t* cs = za ? colsum.data() : nullptr;
      // K in slices whose rows (kb x nn bytes) stay in half of L2: B is walked along its rows page by
      // page, and the partial sums go through c (the kernel accumulates).
      const size_t kb = std::max<size_t>(4, (l2 / 2) / std::max<size_t>(nn, 1) / 4 * 4);
      size_t k0 = 0;
      do {
        const size_t kk = std::min(kb, K - k0);
        gemv->run(M, nn, kk, P.a + k0, P.a_row_bytes, b + k0 * g.ldb + n0, g.ldb, g.c + n0, g.ldc, cs, k0 > 0);
        k0 += kk;
      } while (k0 < K);
      if (!za && !zbp) return;
      for (size_t m = 0; m < M; ++m) {
        int32_t* crow = g.c + m * g.ldc + n0;
        for (size_t i = 0; i < nn; ++i) {
          const uint32_t zb = zbp ? uint32_t(zbp[n0 + i]) : 0u;
          uint32_t v = uint32_t(crow[i]);
          if (za) v += uint32_t(K) * uint32_t(za) * zb - uint32_t(za) * uint32_t(cs[i]);
          if (zbp) v -= zb * uint32_t(rs[m]);
          crow[i] = int32_t(v);
        }
      }
    };
    const size_t tasks = ceil_div(N, chunk);
    if (tasks == 1) task(0);
    else parallel_for(tasks, task);
    return;
  }
  const size_t b_esz = g.b_type == QType::s16 ? 2 : 1;
  if (g.ldb * b_esz <= 4096) {
    // Rows of B within a page: each task packs the panel it needs right before using it (a column strip
    // of B, K lines on at most K pages), so the packed panel is read from L1.
    P.packed = nullptr;
    P.colsum = nullptr;
    P.b_type = g.b_type;
    P.b = g.b;
    P.ldb = g.ldb;
  } else {
    // Long rows: a column strip would touch a page per row (TLB misses on every line): pack all of B in
    // row sweeps first.
    thread_local AlignedBuffer<uint8_t> packed;
    thread_local AlignedBuffer<int32_t> colsum;
    const size_t panels = ceil_div(g.N, size_t(k.mr));
    packed.resize(std::max<size_t>(panels * size_t(k.mr) * round_up(g.K, size_t(k.kgroup)) * a_elem_size(k), 1));
    if (need_colsum) colsum.resize(panels * size_t(k.mr));
    pack_all(k, g.b_type, g.b, g.ldb, g.K, g.N, packed.data(), need_colsum ? colsum.data() : nullptr);
    P.packed = packed.data();
    P.colsum = colsum.data();
  }
  P.kc = choose_kc(k, g.K);
  P.out = QOut::i32;
  P.c = g.c;
  P.ldc = g.ldc;
  P.c_elem = 4;
  execute(P);
}

PackedQGemm::PackedQGemm(const int8_t* w, size_t K, size_t N, size_t ldw)
    : kernel_(&qgemm_kernel(8)), K_(K), N_(N) {
  raw_.resize(std::max<size_t>(K * N, 1));
  for (size_t p = 0; p < K; ++p) std::memcpy(raw_.data() + p * N, w + p * ldw, N);
  const QGemmKernel& k = *kernel_;
  const size_t MR = size_t(k.mr), panels = ceil_div(N, MR);
  packed_.resize(std::max<size_t>(panels * MR * round_up(K, size_t(k.kgroup)) * a_elem_size(k), 1));
  colsum_.resize(std::max<size_t>(panels * MR, 1));
  pack_all(k, QType::s8, raw_.data(), N, K, N, packed_.data(), colsum_.data());
}

void PackedQGemm::run(size_t M, QType x_type, const void* x, size_t ldx, int32_t x_zero, const QOutput& o) const {
  if (M == 0 || N_ == 0) return;
  const QGemmKernel& k = qgemm_kernel(8);
  Plan P{};
  P.kern = &k;
  P.M = M; P.N = N_; P.K = K_;
  thread_local AlignedBuffer<uint8_t> abuf;
  thread_local AlignedBuffer<int32_t> sums;
  P.za = prepare_a(k, x_type, x, ldx, M, K_, x_zero, false, abuf, sums, &P);
  thread_local AlignedBuffer<uint8_t> repacked;
  thread_local AlignedBuffer<int32_t> recolsum;
  if (&k == kernel_) {
    P.packed = packed_.data();
    P.colsum = colsum_.data();
  } else {  // the cap changed since packing: pack per call from the kept weights
    const size_t panels = ceil_div(N_, size_t(k.mr));
    repacked.resize(std::max<size_t>(panels * size_t(k.mr) * round_up(K_, size_t(k.kgroup)) * a_elem_size(k), 1));
    recolsum.resize(panels * size_t(k.mr));
    pack_all(k, QType::s8, raw_.data(), N_, K_, N_, repacked.data(), recolsum.data());
    P.packed = repacked.data();
    P.colsum = recolsum.data();
  }
  P.kc = choose_kc(k, K_);
  P.out = o.out;
  P.c = o.c;
  P.ldc = o.ldc;
  P.c_elem = o.out == QOut::i32 || o.out == QOut::f32 ? 4 : 1;
  P.scale = o.scale;
  P.bias = o.bias;
  P.relu = o.relu;
  P.lo = o.lo;
  P.hi = o.hi;
  execute(P);
}

}  // namespace nnkern
