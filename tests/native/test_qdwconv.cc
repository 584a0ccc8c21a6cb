// Every depthwise micro-kernel this CPU can run (x86-64: AVX2 / AVX-512 / VNNI; aarch64 under qemu-user:
// NEON) against the scalar kernel of the list, byte for byte, over what the Python tests cannot reach
// through QConv2d (whose packer only makes int8 weights and windows up to 7 x 7):
//   weights over the contract's whole int16 range, at its ends and random; inputs 0 / 255 and random;
//   every channel count 1 .. 2 * channel_tile + 17 (each block size and each tail of the vector width);
//   1, 2, 3, 4, 5 and 7 pixels (blocks of 2 or 4 pixels, and the last ones alone);
//   windows of 1, 3, 9 and 25 taps, and 64 / 65 / 81 (past the kernels' 64 row pointers on the stack);
//   padding taps (the shared zero row, read as is) among rows moved by b_offset;
//   every output: int32 (with col_comp and ReLU), float32 (scale, bias, ReLU), uint8 / int8 (clamp to
//   [lo, hi], round half to even);
//   nothing written outside the `channels` of each output pixel (ldc > channels, the rest checked intact).
// Input rows are exact-size allocations (an ASan build catches a channel tail read past them; the Python
// guard-page test covers it under every build). Built for the host and cross-built for aarch64 (one ctest
// per QEMU CPU model).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/isa.h"
#include "harness.h"
#include "kernels/qdwconv_list.h"
#include "core/kernel_family.h"

using namespace nnkern;
using nnkern_test::check;
using nnkern_test::next_random;

namespace {


enum class Fill { random, max_pos, max_neg };  // products at their largest: 255 * 32767, 255 * -32768

struct OutCase {
  const char* name;
  QOut out;
  bool comp, relu, bias;
};

const OutCase kOuts[] = {
    {"i32", QOut::i32, false, false, false},      {"i32-comp-relu", QOut::i32, true, true, false},
    {"f32", QOut::f32, false, false, false},      {"f32-comp-bias-relu", QOut::f32, true, true, true},
    {"u8-comp-bias", QOut::u8, true, false, true}, {"s8-bias", QOut::s8, false, false, true},
};

// One call of `kernel` and of the scalar kernel on the same data; compares every output byte.
void check_call(const QDwconvKernel& kernel, size_t channels, size_t pixels, size_t ks, Fill fill, const OutCase& oc,
                uint32_t seed) {
  uint32_t s = seed;
  const size_t cpad = (channels + kQDwconvChannelPad - 1) / kQDwconvChannelPad * kQDwconvChannelPad;
  const size_t b_offset = 3 + next_random(s) % 100, ldc = channels + 5;
  const uint8_t za = uint8_t(next_random(s));
  std::vector<int32_t> w(ks * cpad, 0);
  for (size_t t = 0; t < ks; ++t)
    for (size_t c = 0; c < channels; ++c)
      w[t * cpad + c] = fill == Fill::random    ? int32_t(next_random(s) % 65536) - 32768
                        : fill == Fill::max_pos ? 32767
                                                : -32768;
  // The zero row (channels bytes of za) and one exact-size row per pixel and tap; about one tap in five pads.
  std::unique_ptr<uint8_t[]> zero(new uint8_t[channels]);
  std::fill(zero.get(), zero.get() + channels, za);
  std::vector<std::unique_ptr<uint8_t[]>> rows;
  std::vector<const void*> b(pixels * ks);
  for (size_t i = 0; i < pixels * ks; ++i) {
    if (next_random(s) % 5 == 0) {
      b[i] = zero.get();
      continue;
    }
    rows.emplace_back(new uint8_t[channels]);
    for (size_t c = 0; c < channels; ++c) rows.back()[c] = fill == Fill::random ? uint8_t(next_random(s)) : 255;
    b[i] = reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(rows.back().get()) - b_offset);
  }
  std::vector<int32_t> comp(cpad, 0);
  std::vector<float> scale(cpad, 0.0f), bias(cpad, 0.0f);
  for (size_t c = 0; c < channels; ++c) {
    comp[c] = int32_t(next_random(s) % 2000001) - 1000000;
    scale[c] = (next_random(s) % 2 ? 1.0f : -1.0f) * 1e-6f * float(1 + next_random(s) % 3000);
    bias[c] = float(int32_t(next_random(s) % 301) - 150) + 0.5f;  // .5: rounding ties reached now and then
  }
  QEpilogue ep;
  ep.out = oc.out;
  ep.relu = oc.relu;
  if (oc.comp) ep.col_comp = comp.data();
  ep.scale = scale.data();
  if (oc.bias) ep.bias = bias.data();
  ep.lo = oc.out == QOut::u8 ? 0.0f : -128.0f;
  ep.hi = oc.out == QOut::u8 ? 255.0f : 127.0f;
  const size_t ob = qout_elem_size(oc.out);
  std::vector<uint8_t> got(pixels * ldc * ob, 0xA5), want(got);
  u8s8_dwconv_1c__scalar.run(channels, pixels, ks, b.data(), zero.get(), b_offset, w.data(), cpad, want.data(), ldc,
                             &ep);
  kernel.run(channels, pixels, ks, b.data(), zero.get(), b_offset, w.data(), cpad, got.data(), ldc, &ep);
  if (got == want) {
    check(true, "call");
    return;
  }
  size_t at = 0;
  while (got[at] == want[at]) ++at;
  const size_t el = at / ob;
  check(false, "%s %s channels=%zu pixels=%zu ks=%zu fill=%d: first difference at pixel %zu channel %zu%s",
        kernel.name, oc.name, channels, pixels, ks, int(fill), el / ldc, el % ldc,
        el % ldc >= channels ? " (outside the channels)" : "");
}

void test_kernel(const QDwconvKernel& kernel) {
  const size_t tile = size_t(kernel.channel_tile), cmax = 2 * tile + 17;
  std::printf("testing %s (channel tile %zu, channels 1..%zu)\n", kernel.name, tile, cmax);
  uint32_t seed = 1;
  for (size_t channels = 1; channels <= cmax; ++channels)
    for (size_t pixels : {1, 2, 3, 4, 5, 7})
      for (size_t ks : {1, 3, 9, 25})
        for (const OutCase& oc : kOuts) check_call(kernel, channels, pixels, ks, Fill::random, oc, seed++);
  // Long windows (the kernels' path past their 64 row pointers on the stack) and the extreme products.
  const size_t some[] = {1, 7, 8, 9, 15, 16, 17, 31, 33, tile - 1, tile, tile + 1, tile + 9, cmax};
  for (size_t channels : some)
    for (size_t ks : {25, 64, 65, 81})
      for (Fill fill : {Fill::random, Fill::max_pos, Fill::max_neg})
        for (const OutCase& oc : kOuts) check_call(kernel, channels, 3, ks, fill, oc, seed++);
}

}  // namespace

int main() {
  int tested = 0;  // the scalar kernel is the oracle
  nnkern_test::for_each_runnable(qdwconv_family().list(), [&](const QDwconvKernel& kern, Isa level) {
    if (level != Isa::scalar) test_kernel(kern), ++tested;
  });
  check(tested > 0 || isa_levels().size() == 1, "no SIMD depthwise kernel ran on this CPU");
  return nnkern_test::finish();
}
