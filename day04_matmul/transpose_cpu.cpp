// day04 transpose: the CPU reference and the registry.
#include <stdexcept>

#include "transpose.hpp"

namespace day04 {

void transpose_cpu(const float* in, float* out, int m, int n) {
  if (m <= 0 || n <= 0) throw std::invalid_argument("transpose_cpu: M and N must be positive");
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c) out[size_t(c) * m + r] = in[size_t(r) * n + c];
}

const std::vector<TransposeVariant>& transpose_variants() {
  static const std::vector<TransposeVariant> kVariants = {
      {"t1_row_per_block", "one output row per block: strided reads", transpose_v1_row_per_block},
      {"t2_coalesced_reads", "32 x 8 threads, coalesced reads, strided writes",
       transpose_v2_coalesced_reads},
      {"t3_smem_tile", "32 x 32 shared tile: coalesced both ways, 32-way bank conflicts",
       transpose_v3_smem_tile},
      {"t4_padded_tile", "tile[32][33]: conflict-free", transpose_v4_padded_tile},
  };
  return kVariants;
}

}  // namespace day04
