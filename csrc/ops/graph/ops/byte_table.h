// The 256-entry byte table of a graph constant, as nnkern.Lookup and the steps that apply a fused lookup's table
// (nnkern.QConv, nnkern.ChannelShuffle) index it: by the 8-bit value's bits as uint8, so an int8 value's entry
// (the constant's element x + 128) sits at its bits (-128 .. -1 at 128 .. 255). Baseline header.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "ops/graph/node.h"

namespace nnkern::graph {

using ByteTable = std::array<uint8_t, 256>;

// c: 256 bytes (checked by the op's inference); signed_index: the values looked up are int8.
inline ByteTable byte_table(const Constant& c, bool signed_index) {
  ByteTable t;
  const uint8_t* entries = c.as<uint8_t>();
  for (size_t b = 0; b < 256; ++b) t[b] = entries[signed_index ? (b + 128) & 255 : b];
  return t;
}

}  // namespace nnkern::graph
