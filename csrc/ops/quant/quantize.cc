#include "ops/quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "kernels/quantize_list.h"

namespace nnkern {

const KernelFamily<QuantizeKernel>& quantize_family() {
  static const KernelFamily<QuantizeKernel> family("quantize", "quantize", {NNKERN_QUANTIZE_LIST(NNKERN_KERNEL_ENTRY)},
                                                   [](const QuantizeKernel&) { return KernelInfo{}; });
  return family;
}
NNKERN_REGISTER_FAMILY(quantize_family)

namespace {

constexpr size_t kChunk = 1 << 16;  // elements per task: big enough to pay for a thread's wake-up

// Calls body(x_off, n, scale, zp, stride) over the (outer, C, inner) view in runs of at most kChunk.
template <typename Body>
void for_runs(size_t outer, size_t C, size_t inner, const float* scale, const int32_t* zp, const Body& body) {
  if (C == 1 || inner > 1) {
    // Runs of one channel: (o, c) rows of `inner` elements, split into chunks.
    const size_t per_row = (inner + kChunk - 1) / kChunk, rows = outer * C;
    const size_t chunk = (inner + per_row - 1) / per_row;
    const size_t rows_per_task = std::max<size_t>(1, kChunk / std::max<size_t>(inner, 1));
    if (per_row > 1 || rows_per_task == 1) {
      parallel_for(rows * per_row, [&](size_t t) {
        const size_t r = t / per_row, s = (t % per_row) * chunk, c = r % C;
        body(r * inner + s, std::min(chunk, inner - s), scale + c, zp + c, size_t(0));
      });
    } else {
      parallel_for((rows + rows_per_task - 1) / rows_per_task, [&](size_t t) {
        for (size_t r = t * rows_per_task; r < std::min(rows, (t + 1) * rows_per_task); ++r)
          body(r * inner, inner, scale + r % C, zp + r % C, size_t(0));
      });
    }
  } else {
    // inner == 1: runs across the C channels with per-element parameters.
    const size_t rows_per_task = std::max<size_t>(1, kChunk / std::max<size_t>(C, 1));
    parallel_for((outer + rows_per_task - 1) / rows_per_task, [&](size_t t) {
      for (size_t o = t * rows_per_task; o < std::min(outer, (t + 1) * rows_per_task); ++o)
        body(o * C, C, scale, zp, size_t(1));
    });
  }
}

}  // namespace

void quantize(const float* x, uint8_t* q, size_t outer, size_t C, size_t inner, const float* scale, const int32_t* zp,
              bool is_signed) {
  const QuantizeKernel& k = quantize_family().dispatched();
  for_runs(outer, C, inner, scale, zp, [&](size_t off, size_t n, const float* s, const int32_t* z, size_t stride) {
    k.quantize(x + off, q + off, n, s, z, stride, is_signed);
  });
}

void quantize_to_nhwc(const float* x, uint8_t* q, size_t N, size_t K, size_t HW, float scale, int32_t zp,
                      bool is_signed) {
  if (K < 1 || K > kQuantizeMaxPlanes) throw std::invalid_argument("quantize_to_nhwc: x must have 1 to 4 channels");
  const QuantizeKernel& k = quantize_family().dispatched();
  const size_t run = std::max<size_t>(8, kChunk / K / 8 * 8), runs = (HW + run - 1) / run;  // pixels per task
  parallel_for(N * runs, [&](size_t t) {
    const size_t n = t / runs, p0 = t % runs * run, len = std::min(run, HW - p0);
    const float* planes[kQuantizeMaxPlanes];
    for (size_t c = 0; c < K; ++c) planes[c] = x + (n * K + c) * HW + p0;
    k.quantize_planes(planes, K, len, scale, zp, is_signed, q + (n * HW + p0) * K);
  });
}

void dequantize(const uint8_t* q, float* x, size_t outer, size_t C, size_t inner, const float* scale,
                const int32_t* zp, bool is_signed) {
  const QuantizeKernel& k = quantize_family().dispatched();
  for_runs(outer, C, inner, scale, zp, [&](size_t off, size_t n, const float* s, const int32_t* z, size_t stride) {
    k.dequantize(q + off, x + off, n, s, z, stride, is_signed);
  });
}

void minmax(const float* x, size_t n, float* lo, float* hi) {
  const QuantizeKernel& k = quantize_family().dispatched();
  const size_t tasks = (n + kChunk - 1) / kChunk;
  if (tasks <= 1) return k.minmax(x, n, lo, hi);
  std::vector<float> los(tasks), his(tasks);  // one result per chunk: min/max is exact in any order
  parallel_for(tasks, [&](size_t t) {
    const size_t s = t * kChunk;
    k.minmax(x + s, std::min(kChunk, n - s), &los[t], &his[t]);
  });
  *lo = *std::min_element(los.begin(), los.end());
  *hi = *std::max_element(his.begin(), his.end());
}

}  // namespace nnkern
