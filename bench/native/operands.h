// Operands of one micro-kernel tile for either family, from the layout a family adapter (families.h)
// describes: the packed A panel of ks taps (kernels/qgemm.h's grouped layout; with G = 1 it is
// kernels/f32_gemm.h's a[q * MR + i]), the B rows with their pointer table, the zero row, and the
// scalar reference the output is checked against. Values are small integers, so every product and sum
// is exact in float32 and int32 alike and the check is an exact comparison. Baseline code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/buffer.h"

namespace nnkern_bench {

enum class Elem { f32, u8, s8, s16, s32 };

inline size_t elem_bytes(Elem e) {
  switch (e) {
    case Elem::u8:
    case Elem::s8: return 1;
    case Elem::s16: return 2;
    default: return 4;
  }
}

// Stores / loads integer value v as element idx of an array of type e.
inline void put(Elem e, void* base, size_t idx, int32_t v) {
  switch (e) {
    case Elem::f32: static_cast<float*>(base)[idx] = float(v); break;
    case Elem::u8: static_cast<uint8_t*>(base)[idx] = uint8_t(v); break;
    case Elem::s8: static_cast<int8_t*>(base)[idx] = int8_t(v); break;
    case Elem::s16: static_cast<int16_t*>(base)[idx] = int16_t(v); break;
    case Elem::s32: static_cast<int32_t*>(base)[idx] = v; break;
  }
}
inline int64_t get(Elem e, const void* base, size_t idx) {
  return e == Elem::f32 ? int64_t(static_cast<const float*>(base)[idx]) : static_cast<const int32_t*>(base)[idx];
}

// Value range used for an operand type: small enough that sums over K <= a few thousand fit int32 and
// float32 exactly.
inline void value_range(Elem e, int32_t* lo, int32_t* hi) {
  switch (e) {
    case Elem::f32: *lo = -4, *hi = 4; break;
    case Elem::u8: *lo = 0, *hi = 255; break;
    case Elem::s8: *lo = -128, *hi = 127; break;
    default: *lo = -1000, *hi = 1000; break;
  }
}

// What the generic code needs of a kernel; families.h fills it from the kernel's struct.
struct Layout {
  size_t mr, nr, group;  // tile and K-group G
  Elem a, b, c;          // packed weights, activation rows, output
  bool b_interleaved;    // plain form reads B as one NR-interleaved sliver (b[j][p * NR]), not NR rows
  int32_t a_max = 0;     // weights in [-a_max, a_max] where the kernel is exact only there (0: a's whole range)
};

// A pointer `bytes` into a buffer, as the kernel's pointer type.
template <typename P>
P pointer_at(const void* base, size_t bytes) {
  return static_cast<P>(static_cast<const void*>(static_cast<const char*>(base) + bytes));
}

// One tile's operands: ks taps of k values (ks = 1: the plain form). BPtr is the family's B pointer type.
template <typename BPtr>
class Operands {
 public:
  Operands(const Layout& l, size_t k, size_t ks, uint32_t seed) : l_(l), k_(k), ks_(ks) {
    const size_t kp = (k + l.group - 1) / l.group * l.group;  // each tap padded to whole groups
    int32_t lo, hi;
    w_.resize(l.mr * ks * k);
    value_range(l.a, &lo, &hi);
    if (l.a_max) lo = -l.a_max, hi = l.a_max;
    for (int32_t& v : w_) v = lo + int32_t(next(seed) % uint32_t(hi - lo + 1));
    x_.resize(ks * l.nr * k);
    value_range(l.b, &lo, &hi);
    for (int32_t& v : x_) v = lo + int32_t(next(seed) % uint32_t(hi - lo + 1));

    a_.resize(ks * kp * l.mr * elem_bytes(l.a) + 64);
    std::memset(a_.data(), 0, a_.size());
    for (size_t t = 0; t < ks; ++t)
      for (size_t p = 0; p < k; ++p)
        for (size_t i = 0; i < l.mr; ++i)
          put(l.a, a_.data(), (t * kp + p - p % l.group) * l.mr + i * l.group + p % l.group, w(i, t, p));

    // B: tap t, column j is row t * NR + j of k values, or (plain, interleaved) b[p * NR + j].
    const size_t eb = elem_bytes(l.b);
    b_.resize(ks * l.nr * k * eb + 64);
    zero_.resize(k * eb + 64);
    std::memset(zero_.data(), 0, zero_.size());
    const bool inter = ks == 1 && l.b_interleaved;
    for (size_t t = 0; t < ks; ++t)
      for (size_t j = 0; j < l.nr; ++j) {
        const size_t row = t * l.nr + j;
        for (size_t p = 0; p < k; ++p) put(l.b, b_.data(), inter ? p * l.nr + j : row * k + p, x(t, j, p));
        ptrs_.push_back(pointer_at<BPtr>(b_.data(), (inter ? j : row * k) * eb));
      }
    c_.resize(l.mr * l.nr * elem_bytes(l.c));
  }

  size_t k() const { return k_; }
  size_t ks() const { return ks_; }
  const void* a() const { return a_.data(); }
  const BPtr* b() const { return ptrs_.data(); }
  const void* zero() const { return zero_.data(); }
  void* c() const { return c_.data(); }  // C(i, j) = c[j * MR + i]
  double macs() const { return double(l_.mr * l_.nr * ks_ * k_); }

  // The scalar reference: C(i, j) = sum over taps and k of W * X, exactly; true if c() holds it.
  bool matches_reference() const {
    for (size_t j = 0; j < l_.nr; ++j)
      for (size_t i = 0; i < l_.mr; ++i) {
        int64_t want = 0;
        for (size_t t = 0; t < ks_; ++t)
          for (size_t p = 0; p < k_; ++p) want += int64_t(w(i, t, p)) * x(t, j, p);
        if (get(l_.c, c_.data(), j * l_.mr + i) != want) return false;
      }
    return true;
  }

 private:
  static uint32_t next(uint32_t& s) { return (s = s * 1664525u + 1013904223u) >> 8; }
  int32_t w(size_t i, size_t t, size_t p) const { return w_[(i * ks_ + t) * k_ + p]; }
  int32_t x(size_t t, size_t j, size_t p) const { return x_[(t * l_.nr + j) * k_ + p]; }

  Layout l_;
  size_t k_, ks_;
  std::vector<int32_t> w_, x_;  // the logical operands, for the reference
  nnkern::AlignedBuffer<uint8_t> a_, b_, zero_, c_;
  std::vector<BPtr> ptrs_;
};

// The plain form walked through `bytes` of memory: step s reads its own A panel and B sliver, so no call
// finds its operands in any cache (with bytes well above the last-level cache). Contents: valid values.
template <typename BPtr>
class StreamOperands {
 public:
  StreamOperands(const Layout& l, size_t k, size_t bytes) : l_(l), k_(k) {
    const size_t kp = (k + l.group - 1) / l.group * l.group;
    a_step_ = (kp * l.mr * elem_bytes(l.a) + 63) / 64 * 64;
    b_step_ = (k * l.nr * elem_bytes(l.b) + 63) / 64 * 64;
    steps_ = bytes / (a_step_ + b_step_) + 1;
    a_.resize(steps_ * a_step_ + 64);
    b_.resize(steps_ * b_step_ + 64);
    fill(l.a, a_.data(), a_.size() / elem_bytes(l.a));
    fill(l.b, b_.data(), b_.size() / elem_bytes(l.b));
    for (size_t s = 0; s < steps_; ++s)
      for (size_t j = 0; j < l.nr; ++j)
        ptrs_.push_back(pointer_at<BPtr>(b_.data(), s * b_step_ + (l.b_interleaved ? j : j * k) * elem_bytes(l.b)));
    c_.resize(l.mr * l.nr * elem_bytes(l.c));
  }

  size_t k() const { return k_; }
  double macs() const { return double(l_.mr * l_.nr * k_); }
  // The next step's operands (wrapping round).
  const void* a() const { return a_.data() + at_ * a_step_; }
  const BPtr* b() const { return ptrs_.data() + at_ * l_.nr; }
  void* c() const { return c_.data(); }
  void advance() { at_ = at_ + 1 == steps_ ? 0 : at_ + 1; }

 private:
  static void fill(Elem e, void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) put(e, p, i, int32_t(i % 7) - 3);
  }
  Layout l_;
  size_t k_, a_step_, b_step_, steps_, at_ = 0;
  nnkern::AlignedBuffer<uint8_t> a_, b_, c_;
  std::vector<BPtr> ptrs_;
};

}  // namespace nnkern_bench
