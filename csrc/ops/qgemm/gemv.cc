// The small-M path of qgemm (ops/qgemm/gemv.h): N split over the threads in chunks of 64 channels, K in
// slices that stay in L2, the zero-point terms added after the kernel.
#include "ops/qgemm/gemv.h"

#include <algorithm>

#include "core/buffer.h"
#include "core/isa.h"
#include "core/threadpool.h"
#include "ops/qgemm/pack.h"

namespace nnkern {

// A thread per this many operations of a few rows: the tiles' limit (driver.h) was 4e6 when the batch-1 QLinear
// measurements of docs/performance.md ("qgemm: threads") were taken.
constexpr double kQGemvMinOpsPerThread = 4e6;

void qgemm_gemv(const QGemvKernel& gemv, const QgemmArgs& g, const QPlan& P) {
  const size_t N = g.N, K = g.K, M = g.M;
  const double ops = 2.0 * double(M) * double(N) * double(std::max<size_t>(K, 1));
  const size_t threads = std::min(size_t(get_num_threads()), size_t(1) + size_t(ops / kQGemvMinOpsPerThread));
  const size_t chunk = qgemm_round_up(qgemm_ceil_div(N, std::max<size_t>(threads, 1)), 64);
  const int8_t* b = static_cast<const int8_t*>(g.b);
  const int32_t za = P.za;
  const int32_t* zbp = P.b_zero;
  const int32_t* rs = P.row_sum;
  const CpuFeatures& f = cpu_features();
  const size_t l2 = f.l2 ? f.l2 : 256 * 1024;
  auto task = [&](size_t t, void* scratch) {
    const size_t n0 = t * chunk, nn = std::min(chunk, N - n0);
    int32_t* cs = za ? static_cast<int32_t*>(scratch) : nullptr;  // the column sums of this chunk
    // K in slices whose rows (kb x nn bytes) stay in half of L2: B is walked along its rows page by
    // page, and the partial sums go through c (the kernel accumulates).
    const size_t kb = std::max<size_t>(4, (l2 / 2) / std::max<size_t>(nn, 1) / 4 * 4);
    size_t k0 = 0;
    do {
      const size_t kk = std::min(kb, K - k0);
      gemv.run(M, nn, kk, P.a + k0, P.a_row_bytes, b + k0 * g.ldb + n0, g.ldb, g.c + n0, g.ldc, cs, k0 > 0);
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
  parallel_for_scratch(qgemm_ceil_div(N, chunk), za ? chunk * sizeof(int32_t) : 0, task);
}

}  // namespace nnkern
