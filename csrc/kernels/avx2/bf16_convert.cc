// float32 <-> bf16 conversions (avx2): kernels/bf16_convert.h's loops under this file's flags.
#include "kernels/bf16_convert_list.h"

namespace nnkern {

NNK_BF16_CONVERT_KERNEL(bf16_convert__avx2)

}  // namespace nnkern
