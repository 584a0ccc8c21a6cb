// The dispatch table: for each op, the best kernel of the ISA levels that are supported and within the cap.
// Ops read it through dispatch() at each call and never name an ISA themselves.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/isa.h"
#include "kernels/f32_gemm.h"

namespace nnkern {

struct DispatchTable {
  Isa f32_gemm_isa;
  const F32GemmKernel* f32_gemm;
};

const DispatchTable& dispatch();

// The kernel an ISA level provides for an op (nullptr if that level has none in this build).
// For tests: run one level's kernel directly; callers must check isa_supported() first.
const F32GemmKernel* f32_gemm_kernel_for(Isa isa);

// (op, kernel name) for every op, as the current table chose them.
std::vector<std::pair<std::string, std::string>> chosen_kernels();

}  // namespace nnkern
