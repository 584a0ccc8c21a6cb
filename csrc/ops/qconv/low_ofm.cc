// The "low_ofm" convolution (seed I11): groups == 1, at most 4 output channels, output pixels in vector
// lanes (kernels/qconv_low_ofm.h). The kernels read the NHWC input in place (pixel loads re-laid out by
// in-register transposes, gathers for leftover channel groups): no padded copy, no indirection buffer. Padding
// is exact without a copy: a padding column is a masked-off lane that holds the zero point za, and the
// compensation -za * (weights of the taps passed) removes what it adds; a padding row is not passed at all, the
// compensation summing only the valid tap rows (row_sum), so every padding tap adds exactly 0 as in
// sum (x - za) w. The one copy: when IC % 4 != 0 the last group of a pixel reads up to 3 bytes past its
// channels (weights 0 there), which past the last pixel of the input would leave the caller's buffer, so the
// input's final rows (the last one, or the last 2-3 if a row has under 3 bytes) are copied with 4 bytes of slack
// into the workspace and read from there.
// Windows of more than one tap, on the SIMD kernels: tasks are bands of kBand output rows of one image, and a
// band first re-lays out the input rows it reads (the kernel's relayout: groups of 4 channels x pixels per stride
// phase, padding columns filled) into its thread's scratch, so that each of the KH x KW taps reading them is
// plain vector loads instead of a re-layout per tap, from cache (rows shared by two bands are re-laid out by
// both). Otherwise tasks are output rows. Every output row is computed whole by one kernel call (the weights,
// at most ks * IC * 4 bytes, stay in cache), the same way whatever the band or thread: results do not depend
// on the thread count.
// auto takes it for groups == 1 and OC <= 4 where a SIMD kernel runs (x86: pixels in lanes beat channels in lanes of
// which OC would fill 4 at most), except against AMX's GEMM kernels past 256 input channels and for strided windows
// under 25 taps over 16 or more channels (docs/performance.md).
#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "core/checked.h"
#include "core/kernel_family.h"
#include "core/threadpool.h"
#include "kernels/qconv_low_ofm_list.h"
#include "ops/qconv/layer.h"

namespace nnkern {
namespace {


constexpr size_t kSlack = 4;  // readable bytes after the copied final row
constexpr size_t kBand = 8;   // output rows per task on re-laid-out rows
// A band's re-laid-out rows larger than this (very wide rows of many channels) stay NHWC: the per-tap path.
constexpr size_t kMaxBandBytes = size_t(4) << 20;

// The final rows whose 3-byte over-read could pass the input's end (none when IC % 4 == 0).
size_t tail_rows(const QConvCall& c) {
  const size_t IC = c.L.geometry().IC, row_bytes = c.W * IC;
  return IC % 4 ? std::min(c.N * c.H, (kSlack - 1 + row_bytes - 1) / row_bytes) : 0;
}

size_t tail_bytes(const QConvCall& c) {
  const size_t t = tail_rows(c);
  return t ? checked_round_up(checked_add(checked_mul(t, c.W, c.L.geometry().IC), kSlack), 64) : 0;
}

const QConvLowOfmKernel& kernel_of(const QConvCall& c) {
  const QConvLowOfmKernel* named = c.kernel.empty() ? nullptr : qconv_low_ofm_family().named(c.kernel);
  return named ? *named : qconv_low_ofm_family().dispatched();
}

// Input rows a band of kBand output rows reads at most.
size_t band_rows(const ConvGeometry& geo) { return (kBand - 1) * geo.sh + (geo.KH - 1) * geo.dh + 1; }

// Entries per stride phase of a re-laid-out row (kernels/qconv_low_ofm.h), or 0: the kernel reads the NHWC rows.
size_t relaid_q(const QConvCall& c) {
  const ConvGeometry& geo = c.L.geometry();
  const QConvLowOfmKernel& k = kernel_of(c);
  if (!k.relayout || geo.ks() == 1) return 0;
  const size_t L = size_t(k.lanes);
  const size_t q = ((c.OW + L - 1) / L * L + (geo.KW - 1) * geo.dw / geo.sw + L - 1) / L * L;
  const double band_bytes = double(band_rows(geo)) * double((geo.IC + 3) / 4 * geo.sw * q) * sizeof(int32_t);
  return band_bytes <= double(kMaxBandBytes) ? q : 0;
}

size_t relaid_row_ints(const QConvCall& c) {
  const ConvGeometry& geo = c.L.geometry();
  return (geo.IC + 3) / 4 * geo.sw * relaid_q(c);
}

// [ks taps][G = ceil(IC / 4) groups][4 channels][4 bytes] int8, zero-padded in both; row_sum[kh][4]: the weights of
// tap row kh summed (over kw and channels), so the driver can fold the input zero point of the taps it passes and
// leave out padding rows exactly; factor / offset padded to 4 (empty for int32 output).
struct Weights {
  size_t groups4 = 0;
  AlignedBuffer<int8_t> w;
  AlignedBuffer<int32_t> row_sum;
  AlignedBuffer<float> factor, offset;
};

class LowOfm final : public QConvAlgorithm {
 public:
  explicit LowOfm(const PackedQConv2d& layer) : QConvAlgorithm("low_ofm", layer) {}

  bool applicable(const QConvCall& c) const override {
    const ConvGeometry& g = L.geometry();
    if (g.groups != 1 || g.OC > kQConvLowOfmMaxOc) return false;
    // The kernels' int32 lane arithmetic: every column a lane forms (up to one block of 64 pixels past the row's
    // last), times IC, must fit int32.
    const double span = double(c.OW + 64) * double(g.sw) + double(g.KW) * double(g.dw) + double(g.pl) + double(c.W);
    return span * double(g.IC) < double(INT32_MAX);
  }

  bool preferred(const QConvCall& c) const override {
    if (qconv_low_ofm_family().dispatched_level() == Isa::scalar) return false;
    // Against the AMX GEMM kernels (tiles of 16 x 64 bytes, idle lanes and all), indirect / im2col win past 256
    // input channels and for strided windows under 25 taps over 16 or more channels (the re-layout of each input
    // row then serves few outputs).
    const ConvGeometry& g = L.geometry();
    const QGemmKernels* amx = qgemm_kernels_for(Isa::amx);
    if (amx && &qgemm_kernel(8, g.icg(), g.ks()) == amx->i8) {
      if (g.IC > 256) return false;
      if (g.sh > 1 || g.sw > 1) return g.IC < 16 || g.ks() >= 25;
    }
    return true;
  }

  size_t workspace_bytes(const QConvCall& c) const override { return tail_bytes(c); }

  void run(const QConvCall& c, QConvStage& out, void* workspace) const override {
    const QConvLowOfmKernel& k = kernel_of(c);
    const ConvGeometry& geo = L.geometry();
    const Weights& w = weights();
    const size_t IC = geo.IC, OC = geo.OC, M = kQConvLowOfmMaxOc, G = w.groups4, H = c.H, W = c.W, OH = c.OH,
                 OW = c.OW, row_bytes = W * IC;
    const uint8_t* x = static_cast<const uint8_t*>(c.x);
    const size_t R = c.N * H, T = tail_rows(c);  // rows r >= R - T are read from the copy
    uint8_t* copy = static_cast<uint8_t*>(workspace);
    if (T) {
      std::memcpy(copy, x + (R - T) * row_bytes, T * row_bytes);
      std::memset(copy + T * row_bytes, 0, tail_bytes(c) - T * row_bytes);
    }
    const bool s8 = c.x_type == QType::s8;
    const int32_t za = s8 ? L.x_zero() + 128 : L.x_zero();  // in the uint8 domain
    const uint32_t x_fill = uint32_t(uint8_t(L.x_zero())) * 0x01010101u;
    auto input_row = [&](size_t r) { return r >= R - T ? copy + (r - (R - T)) * row_bytes : x + r * row_bytes; };
    const size_t q = relaid_q(c), row_ints = relaid_row_ints(c);  // q > 0: the kernel reads re-laid-out rows
    QEpilogue ep0 = qconv_epilogue(out);
    ep0.scale = w.factor.size() ? w.factor.data() : nullptr;
    ep0.bias = w.offset.size() ? w.offset.data() : nullptr;
    QConvLowOfmRow a0{};
    a0.KW = geo.KW;
    a0.ix0 = -ptrdiff_t(geo.pl);
    a0.sw = geo.sw;
    a0.dw = geo.dw;
    a0.W = W;
    a0.IC = IC;
    a0.m = OC;
    a0.n = OW;
    a0.x_fill = x_fill;
    a0.q = q;
    a0.flip = s8;
    a0.plane = out.planar_plane();
    const size_t esz = out.tile_elem();
    // In place where the output's pixels are OC channels apart (the kernels store m channels per pixel), or planar
    // (channel rows plane apart); else each row in chunks of whole pixel blocks through a stack buffer (NHWC, ld
    // OC), committed as slot (row, chunk). A chunk starts at a multiple of the kernel's block, so a re-laid-out row
    // shifted to it stays aligned.
    const bool in_place = (out.in_place() && out.ldc() == OC) || a0.plane;
    const size_t px = size_t(k.pixels), room = kQConvTileBytes - kQConvTileSlack;
    const size_t chunk = in_place ? OW : std::min(OW, std::max(px, room / (OC * esz) / px * px));
    const size_t chunks = (OW + chunk - 1) / chunk;
    if (!in_place) {
      if (chunk * OC * esz > room) throw std::invalid_argument("qconv2d: tile too large for the output stage's buffer");
      out.begin(OH, OW, c.N * OH * chunks);
    }
    // Valid tap rows of output row oh: 0 <= iy = oh * sh + kh * dh - pt < H, kh in a contiguous range [lo, hi).
    auto tap_rows = [&](size_t oh, size_t* lo, size_t* hi) {
      *lo = *hi = 0;
      for (size_t kh = 0; kh < geo.KH; ++kh) {
        const ptrdiff_t iy = ptrdiff_t(oh * geo.sh + kh * geo.dh) - ptrdiff_t(geo.pt);
        if (iy < 0) *lo = kh + 1;
        if (iy >= 0 && iy < ptrdiff_t(H)) *hi = kh + 1;
      }
    };
    // Output row (n, oh); rows[kh - lo] = where tap row kh's input row is (NHWC, or re-laid out by row_of).
    auto compute_row = [&](size_t n, size_t oh, const uint8_t** rows, const auto& row_of) {
      size_t lo, hi;
      tap_rows(oh, &lo, &hi);
      uint32_t sum[kQConvLowOfmMaxOc] = {};
      for (size_t kh = lo; kh < hi; ++kh)
        for (size_t o = 0; o < M; ++o) sum[o] += uint32_t(w.row_sum.data()[kh * M + o]);
      // Pixels from ox0 on: NHWC rows through ix0, re-laid-out rows (entry = output pixel) shifted to it.
      auto point_rows = [&](size_t ox0) {
        for (size_t kh = lo; kh < hi; ++kh)
          rows[kh - lo] = row_of(oh * geo.sh + kh * geo.dh - geo.pt) + (q ? ox0 * sizeof(int32_t) : 0);
      };
      int32_t comp[kQConvLowOfmMaxOc];  // sum (x - za) w = sum x w - za * (the passed taps' weights), modulo 2^32
      for (size_t o = 0; o < M; ++o) comp[o] = int32_t(0u - uint32_t(za) * sum[o]);
      QEpilogue ep = ep0;
      ep.col_comp = comp;
      QConvLowOfmRow a = a0;
      a.rows = rows;
      a.kh_n = hi > lo ? hi - lo : 0;
      a.w = w.w.data() + lo * geo.KW * G * M * 4;
      a.ep = &ep;
      if (in_place) {
        point_rows(0);
        a.c = a.plane ? out.planar_at((n * OH + oh) * OW, 0) : out.at((n * OH + oh) * OW, 0);
        k.run(a);
        if (!a.plane) out.stored((n * OH + oh) * OW, OW, 0, OC);
        return;
      }
      alignas(64) uint8_t buf[kQConvTileBytes];
      a.c = buf;
      a.plane = 0;
      for (size_t i = 0; i < chunks; ++i) {
        const size_t ox0 = i * chunk;
        point_rows(ox0);
        a.n = std::min(chunk, OW - ox0);
        a.ix0 = ptrdiff_t(ox0 * geo.sw) - ptrdiff_t(geo.pl);
        k.run(a);
        out.commit((n * OH + oh) * chunks + i, (n * OH + oh) * OW + ox0, a.n, 0, OC, buf, OC);
      }
    };
    const size_t ptr_bytes = checked_round_up(geo.KH * sizeof(void*), 64);
    if (!q) {
      parallel_for_scratch(c.N * OH, ptr_bytes, [&](size_t task, void* scratch) {
        const size_t n = task / OH;
        compute_row(n, task % OH, static_cast<const uint8_t**>(scratch),
                    [&](size_t iy) { return input_row(n * H + iy); });
      });
      return;
    }
    const size_t bands = (OH + kBand - 1) / kBand, slots = band_rows(geo);
    parallel_for_scratch(c.N * bands, ptr_bytes + slots * row_ints * sizeof(int32_t), [&](size_t task, void* scratch) {
      const size_t n = task / bands, oh0 = task % bands * kBand, oh1 = std::min(OH, oh0 + kBand);
      int32_t* xt = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(scratch) + ptr_bytes);
      // The band's input rows [iy0, iy1), re-laid out: row iy at xt + (iy - iy0) * row_ints.
      size_t lo, hi, iy0 = H, iy1 = 0;
      for (size_t oh = oh0; oh < oh1; ++oh) {
        tap_rows(oh, &lo, &hi);
        if (lo >= hi) continue;
        iy0 = std::min(iy0, oh * geo.sh + lo * geo.dh - geo.pt);
        iy1 = std::max(iy1, oh * geo.sh + (hi - 1) * geo.dh - geo.pt + 1);
      }
      for (size_t iy = iy0; iy < iy1; ++iy) {
        const QConvLowOfmRelayout rl{input_row(n * H + iy), xt + (iy - iy0) * row_ints, W, IC, geo.sw, q, geo.pl,
                                     x_fill, s8};
        k.relayout(rl);
      }
      for (size_t oh = oh0; oh < oh1; ++oh)
        compute_row(n, oh, static_cast<const uint8_t**>(scratch),
                    [&](size_t iy) { return reinterpret_cast<const uint8_t*>(xt + (iy - iy0) * row_ints); });
    });
  }

 private:
  const Weights& weights() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (packed_) return *packed_;
    const ConvGeometry& geo = L.geometry();
    const size_t OC = geo.OC, IC = geo.IC, KW = geo.KW, ks = geo.ks(), G = (IC + 3) / 4, M = kQConvLowOfmMaxOc;
    auto p = std::make_unique<Weights>();
    p->groups4 = G;
    p->w.resize(checked_mul(ks, G, M, 4));
    p->row_sum.resize(geo.KH * M);
    std::fill(p->w.data(), p->w.data() + ks * G * M * 4, int8_t(0));
    std::fill(p->row_sum.data(), p->row_sum.data() + geo.KH * M, 0);
    // The weights: ks * IC rows (tap t, channel ic at row t * IC + ic) of OC columns (groups == 1). Sums wrap as
    // the kernels' do.
    const int8_t* raw = L.raw_weights();
    for (size_t t = 0; t < ks; ++t)
      for (size_t ic = 0; ic < IC; ++ic)
        for (size_t oc = 0; oc < OC; ++oc) {
          const int8_t v = raw[(t * IC + ic) * OC + oc];
          p->w.data()[((t * G + ic / 4) * M + oc) * 4 + ic % 4] = v;
          int32_t& s = p->row_sum.data()[t / KW * M + oc];
          s = int32_t(uint32_t(s) + uint32_t(int32_t(v)));
        }
    qconv_contiguous_factors(L, M, &p->factor, &p->offset);
    packed_ = std::move(p);
    return *packed_;
  }

  mutable std::mutex mu_;
  mutable std::unique_ptr<Weights> packed_;
};

}  // namespace

std::unique_ptr<QConvAlgorithm> make_qconv_low_ofm(const PackedQConv2d& layer) { return std::make_unique<LowOfm>(layer); }

}  // namespace nnkern
