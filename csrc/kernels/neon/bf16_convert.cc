// float32 <-> bf16 conversions (neon): kernels/bf16_convert.h's loops under this file's flags.
#include "kernels/bf16_convert_list.h"

namespace nnkern {

NNK_BF16_CONVERT_KERNEL(bf16_convert__neon)

}  // namespace nnkern
