// Transpose of any element type (moved as 1/2/4/8-byte words). The permutation is simplified first: dimensions of
// size 1 dropped, output dimensions that are adjacent in the input merged. What remains decides the step:
// - nothing moves (only dimensions of size 1 did): a view of the input, no copy;
// - a batch of 2-D transposes (NCHW <-> NHWC at a network's input and output: [N, C, HW] <-> [N, HW, C]): square
//   tiles, so that both the rows read and the rows written come in whole cache lines, spread over the pool;
// - anything else: the output walked in order, the input read through the permuted strides (StridedCopy).
#include <algorithm>

#include "core/threadpool.h"
#include "ops/graph/ops/common.h"
#include "ops/graph/ops/strided.h"

namespace nnkern::graph {

namespace {

std::vector<int64_t> perm_of(const NodeSpec& n) {
  const size_t r = n.in(0).rank();
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (perm.empty()) {
    for (size_t i = 0; i < r; ++i) perm.push_back(int64_t(r - 1 - i));
  }
  if (perm.size() != r) n.invalid("perm must have one entry per input dimension");
  std::vector<bool> seen(r, false);
  for (int64_t& p : perm) {
    const size_t a = normalize_axis(p, r, "perm entry");
    if (seen[a]) n.invalid("perm repeats an axis");
    seen[a] = true;
    p = int64_t(a);
  }
  return perm;
}

std::vector<TensorDesc> infer_transpose(const NodeSpec& n) {
  const TensorDesc& x = n.in(0);
  const std::vector<int64_t> perm = perm_of(n);
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(x.shape[size_t(p)]);
  return one(x.dtype, shape);
}

// The transpose with dimensions of size 1 dropped and runs of output dimensions that are consecutive input
// dimensions merged: `shape` the merged input dimensions, `perm` over them.
struct Simplified {
  std::vector<int64_t> shape, perm;
};

Simplified simplify(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& perm) {
  std::vector<int64_t> kept;  // perm without the dimensions of size 1, renumbered
  std::vector<int64_t> renumber(in_shape.size(), -1), kept_shape;
  for (size_t i = 0; i < in_shape.size(); ++i)
    if (in_shape[i] != 1) {
      renumber[i] = int64_t(kept_shape.size());
      kept_shape.push_back(in_shape[i]);
    }
  for (int64_t p : perm)
    if (renumber[size_t(p)] >= 0) kept.push_back(renumber[size_t(p)]);
  // Groups of output dimensions that are consecutive input dimensions.
  std::vector<std::vector<int64_t>> groups;
  for (int64_t p : kept) {
    if (!groups.empty() && groups.back().back() + 1 == p) groups.back().push_back(p);
    else groups.push_back({p});
  }
  // Number the groups in input order.
  std::vector<size_t> order(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) order[g] = g;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groups[a][0] < groups[b][0]; });
  Simplified s;
  s.perm.assign(groups.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) {
    int64_t d = 1;
    for (int64_t p : groups[order[k]]) d *= kept_shape[size_t(p)];
    s.shape.push_back(d);
    s.perm[order[k]] = int64_t(k);
  }
  return s;
}

constexpr size_t kTile = 16;
constexpr size_t kSerialBelow = size_t(1) << 15;  // elements a transpose moves on the calling thread

// A 4 x 4 block: four rows of four read into locals, written as four columns; the compiler turns this into
// register shuffles, which strided element loops do not get.
template <typename T>
inline void transpose_4x4(const T* s, size_t C, T* d, size_t R) {
  const T a0 = s[0], a1 = s[1], a2 = s[2], a3 = s[3];
  s += C;
  const T b0 = s[0], b1 = s[1], b2 = s[2], b3 = s[3];
  s += C;
  const T c0 = s[0], c1 = s[1], c2 = s[2], c3 = s[3];
  s += C;
  const T e0 = s[0], e1 = s[1], e2 = s[2], e3 = s[3];
  d[0] = a0; d[1] = b0; d[2] = c0; d[3] = e0;
  d += R;
  d[0] = a1; d[1] = b1; d[2] = c1; d[3] = e1;
  d += R;
  d[0] = a2; d[1] = b2; d[2] = c2; d[3] = e2;
  d += R;
  d[0] = a3; d[1] = b3; d[2] = c3; d[3] = e3;
}

// y[b][c][r] = x[b][r][c] for B matrices of R x C, in kTile x kTile tiles (4 x 4 blocks within, elements at the
// ragged edges); tiles in row-major order across the pool.
template <typename T>
void transpose_2d(const T* x, T* y, size_t B, size_t R, size_t C) {
  const size_t tr = (R + kTile - 1) / kTile, tc = (C + kTile - 1) / kTile, per_matrix = tr * tc;
  auto tiles = [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const size_t b = t / per_matrix, r0 = (t % per_matrix) / tc * kTile, c0 = t % tc * kTile;
      const size_t rn = std::min(kTile, R - r0), cn = std::min(kTile, C - c0);
      const size_t r4 = rn / 4 * 4, c4 = cn / 4 * 4;
      const T* src = x + b * R * C + r0 * C + c0;
      T* dst = y + b * R * C + c0 * R + r0;
      for (size_t i = 0; i < r4; i += 4)
        for (size_t j = 0; j < c4; j += 4) transpose_4x4(src + i * C + j, C, dst + j * R + i, R);
      for (size_t j = 0; j < cn; ++j)  // what the blocks left: the bottom rows of their columns, the ragged columns
        for (size_t i = j < c4 ? r4 : 0; i < rn; ++i) dst[j * R + i] = src[i * C + j];
    }
  };
  const size_t total = B * per_matrix;
  if (B * R * C < kSerialBelow) tiles(0, total);
  else parallel_for_ranges(total, tiles);
}

// The same for matrices of K (2 to 4) rows or columns, such as an image's few channel planes interleaved into
// NHWC and back: one loop along the long side with K fixed, which the compiler vectorizes into interleaving
// stores or deinterleaving loads (the tiles would leave every element to their ragged-edge loop).
template <typename T, size_t K>
void transpose_narrow(const T* x, T* y, size_t B, size_t R, size_t C) {
  const bool few_rows = R == K;  // else C == K
  const size_t L = few_rows ? C : R;  // the long side
  auto run = [&](size_t t0, size_t t1) {  // t: (matrix, index along the long side)
    for (size_t t = t0; t < t1;) {
      const size_t b = t / L, l0 = t % L, l1 = std::min(L, l0 + (t1 - t));
      const T* s = x + b * R * C;
      T* d = y + b * R * C;
      if (few_rows && K == 2) {  // two rows interleaved (strided.h: byte rows in vector shuffles)
        interleave(s + l0, s + L + l0, d + 2 * l0, l1 - l0);
      } else if (few_rows && K == 3) {  // three rows interleaved, and back (strided.h: vector shuffles)
        interleave3(s + l0, s + L + l0, s + 2 * L + l0, d + 3 * l0, l1 - l0);
      } else if (K == 3) {
        deinterleave3(s + 3 * l0, d + l0, d + L + l0, d + 2 * L + l0, l1 - l0);
      } else if (few_rows) {  // y[l][k] = x[k][l]
        for (size_t l = l0; l < l1; ++l)
          for (size_t k = 0; k < K; ++k) d[l * K + k] = s[k * L + l];
      } else {  // y[k][l] = x[l][k]
        for (size_t l = l0; l < l1; ++l)
          for (size_t k = 0; k < K; ++k) d[k * L + l] = s[l * K + k];
      }
      t += l1 - l0;
    }
  };
  const size_t total = B * L;
  if (total * K < kSerialBelow) run(0, total);
  else parallel_for_ranges(total, run);
}

// The short side when the narrow loop takes the matrices, else 0: 2 or 3 rows or columns always (the tiles' 4 x 4
// blocks never apply: ShuffleNet's channel shuffle in NHWC is 2 x 24 per pixel), 4 on a long enough other side.
size_t narrow_side(size_t R, size_t C) {
  const size_t k = std::min(R, C);
  return k >= 2 && (k <= 3 || (k == 4 && std::max(R, C) >= 4 * kTile)) ? k : 0;
}

template <typename T>
void transpose_matrices(const T* x, T* y, size_t B, size_t R, size_t C) {
  switch (narrow_side(R, C)) {
    case 2: return transpose_narrow<T, 2>(x, y, B, R, C);
    case 3: return transpose_narrow<T, 3>(x, y, B, R, C);
    case 4: return transpose_narrow<T, 4>(x, y, B, R, C);
    default: return transpose_2d(x, y, B, R, C);
  }
}

std::unique_ptr<Step> make_transpose(const NodeSpec& n, const std::vector<TensorDesc>& out, SharedLayers&) {
  const TensorDesc& x = n.in(0);
  const Simplified s = simplify(x.shape, perm_of(n));
  const size_t bytes = out[0].bytes(), esize = dtype_size(x.dtype);
  const size_t r = s.perm.size();
  if (r <= 1 || bytes == 0) return view_step(bytes);
  if ((r == 2 && s.perm == std::vector<int64_t>{1, 0}) || (r == 3 && s.perm == std::vector<int64_t>{0, 2, 1})) {
    const size_t B = r == 3 ? size_t(s.shape[0]) : 1, R = size_t(s.shape[r - 2]), C = size_t(s.shape[r - 1]);
    return fn_step(
        [=](const StepData& d) {
          with_word(esize, [&](auto w) {
            using T = decltype(w);
            transpose_matrices(d.in<T>(0), d.out<T>(0), B, R, C);
          });
        },
        narrow_side(R, C) ? "narrow 2-D" : "tiled 2-D");
  }
  std::vector<int64_t> oshape;
  for (int64_t p : s.perm) oshape.push_back(s.shape[size_t(p)]);
  const StridedCopy copy(oshape, permuted_strides(s.shape, s.perm), 0, esize);
  return fn_step([copy](const StepData& d) { copy.run(d.in(0), d.out(0)); }, "strided");
}

}  // namespace

void register_graph_ops_transpose() { register_op("Transpose", {infer_transpose, make_transpose}); }

}  // namespace nnkern::graph
