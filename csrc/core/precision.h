// Float32 precision levels, in torch's terms (torch.set_float32_matmul_precision): what a float32 op may trade
// for speed. "highest" (the default): float32 products and sums only, the direct / GEMM algorithms; "high": also
// Winograd's transformed products (ops/conv/winograd.cc: a larger, documented error bound); "medium": also bf16
// products with float32 accumulation. The level only widens what "auto" may pick; an algorithm named explicitly
// runs at any level. Baseline header.
#pragma once
#include <stdexcept>
#include <string>

namespace nnkern {

enum class Float32Precision { highest, high, medium };

inline Float32Precision float32_precision_from_name(const std::string& name) {
  if (name == "highest") return Float32Precision::highest;
  if (name == "high") return Float32Precision::high;
  if (name == "medium") return Float32Precision::medium;
  throw std::invalid_argument("float32 precision must be 'highest', 'high' or 'medium', got '" + name + "'");
}

}  // namespace nnkern
