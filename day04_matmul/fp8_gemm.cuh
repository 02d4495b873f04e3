#pragma once
// day04: the tile and pipeline sizes the FP8 GEMMs v14-v20 (gemm_v14_wgmma_fp8.cu ...
// gemm_v20_wgmma_fp8_epilogue.cu) share. Each variant's file keeps what it changes.
#include <cstddef>

namespace day04::fp8_gemm {

inline constexpr int kBM = 128, kBN = 128;
inline constexpr int kBK = 128;    // k per stage: 128 e4m3 = one 128-byte swizzled row
inline constexpr int kKStep = 32;  // k per wgmma (32 bytes inside the row)
inline constexpr int kStages = 6, kThreads = 384;
inline constexpr int kABytes = kBM * kBK;  // 16 KB
inline constexpr int kBBytes = kBN * kBK;  // 16 KB of B^T: 128 rows (n) of 128 bytes of k
inline constexpr int kStageBytes = kABytes + kBBytes;
// The stages, the 1024-byte alignment slack and the full / empty barriers (after the stages).
inline constexpr size_t kSmemBytes =
    size_t(kStages) * kStageBytes + 1024 /* alignment slack */ + 128;
inline constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // (40 + 2 x 232) x 128 <= 64 K

}  // namespace day04::fp8_gemm
