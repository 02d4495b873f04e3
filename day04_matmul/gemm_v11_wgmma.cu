// GEMM v11: Hopper wgmma + TMA (sm_90a only; built when CMAKE_CUDA_ARCHITECTURES has 90a), BF16
// and TF32. What changed from v10, and why it is faster:
//  - the tile copies are done by the TMA engine: one thread describes a whole 2D box (a
//    CUtensorMap made on the host) and the hardware moves it into shared memory, in the 128-byte
//    swizzled layout the tensor cores read without bank conflicts, zero-filling outside the matrix,
//    and signals an mbarrier with the byte count when it lands. No thread spends instructions on
//    addresses or predicates;
//  - wgmma: a warpgroup (4 warps, 128 threads) issues one asynchronous m64n256k16 (BF16) or
//    m64n256k8 (TF32) multiply whose operands both come straight from shared memory (through
//    64-bit matrix descriptors): no ldmatrix, no fragment registers. v10's mma.sync needed a warp
//    instruction per 16 x 8 x 16.
// Tiles: 128 x 256 x (128 bytes of k) per block, two warpgroups of 64 x 256 (128 fp32 accumulators
// per thread), a 4-stage TMA pipeline (48 KB per stage). (A 128 x 128 tile with m64n128k16
// measured 483 TFLOP/s in BF16 at 4096^3 on the H100, 0.64x cuBLAS; the wider tile reads each A
// tile for twice the columns.)
// Operand layouts: A is K-major (row-major M x K) in both. In BF16, B is row-major K x N, i.e.
// N-major, which wgmma reads transposed (imm-trans-b = 1). TF32 has no transposed mode: both
// operands must be K-major, so the launcher first transposes B into an N x K scratch buffer with
// day04's padded-tile transpose (t4), and the time of that transpose is part of v11's time.
// TMA needs 16-byte row strides and addresses: BF16 needs K % 8 == 0 and N % 8 == 0, TF32
// K % 4 == 0; other shapes go to v10.
// (Layouts and descriptor fields: the PTX ISA, "Asynchronous warpgroup level matrix multiply";
// the canonical swizzled layouts are those CUTLASS documents for its GMMA descriptors.)
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/cuda_check.hpp"
#include "common/device_buffer.hpp"
#include "common/math.hpp"
#include "gemm.hpp"
#include "transpose.hpp"

namespace day04 {

namespace {

constexpr int kBM = 128, kBN = 256, kStages = 4, kThreads = 256;
constexpr int kABytes = kBM * 128;              // 16 KB: 128 rows of 128 bytes of k
constexpr int kBBytes = kBN * 128;              // 32 KB: 128 bytes of k for 256 columns
constexpr int kStageBytes = kABytes + kBBytes;  // 48 KB
constexpr size_t kSmemBytes = size_t(kStages) * kStageBytes + 1024 /* alignment slack */ + 64;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarrier -----------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)),
               "r"(bytes));
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity));
}

// ---- TMA: a 2D box from global into shared memory, completing on an mbarrier ------------------
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
}

// ---- wgmma -------------------------------------------------------------------------------------
// A shared-memory matrix descriptor: start address, leading and stride byte offsets (all in
// 16-byte units) and the 128-byte swizzle mode (1 in bits 62-63).
__device__ __forceinline__ uint64_t make_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  uint64_t d = 0;
  d |= uint64_t((smem_u32(p) & 0x3FFFF) >> 4);
  d |= uint64_t((lbo >> 4) & 0x3FFF) << 16;
  d |= uint64_t((sbo >> 4) & 0x3FFF) << 32;
  d |= uint64_t(1) << 62;
  return d;
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// d (64 x 256 fp32, 128 registers per thread) += A (64 x 16, K-major) * B (16 x 256, N-major).
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t desc_a,
                                                      uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
      "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "
      "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, "
      "%70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, "
      "%87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, "
      "%103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, "
      "%117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, "
      "1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b));
}

// d (64 x 256 fp32) += A (64 x 8, K-major) * B (8 x 256, K-major); TF32 allows no transpose.
__device__ __forceinline__ void wgmma_m64n256k8_tf32(float (&d)[128], uint64_t desc_a,
                                                     uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
      "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, "
      "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, "
      "%70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, "
      "%87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, "
      "%103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, "
      "%117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b));
}

// What differs between the two element types.
struct Bf16 {
  using T = __nv_bfloat16;
  static constexpr int kBK = 64, kKStep = 16;  // k per stage (128 bytes), k per wgmma
};
struct Tf32 {
  using T = float;
  static constexpr int kBK = 32, kKStep = 8;
};

}  // namespace

template <typename E>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_v11_kernel(int m, int n, int k, float alpha, float beta, float* __restrict__ c,
                    const __grid_constant__ CUtensorMap map_a,
                    const __grid_constant__ CUtensorMap map_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBK = E::kBK;
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes: stage buffers must start on a 1024-byte
  // boundary.
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);

  const int tid = threadIdx.x, wg = tid / 128, lane = tid % 32, warp_in_wg = (tid % 128) / 32;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int num_tiles = gpu100::ceil_div(k, kBK);

  auto stage_a = [&](int s) { return smem + s * kStageBytes; };
  auto stage_b = [&](int s) { return smem + s * kStageBytes + kABytes; };
  // One thread issues the TMA boxes of k-tile t into stage s: A (128 rows x 128 bytes of k), and
  // B: in BF16 four boxes of 64 k-rows x 64 columns (8 KB apart), in TF32 one box of 256 rows of
  // the transposed B x 32 k.
  auto issue = [&](int t, int s) {
    mbar_expect_tx(&full[s], kStageBytes);
    tma_load_2d(stage_a(s), &map_a, t * kBK, row0, &full[s]);
    if constexpr (std::is_same_v<E, Bf16>) {
#pragma unroll
      for (int q = 0; q < kBN / 64; ++q) {
        tma_load_2d(stage_b(s) + q * 8192, &map_b, col0 + 64 * q, t * kBK, &full[s]);
      }
    } else {
      tma_load_2d(stage_b(s), &map_b, t * kBK, col0, &full[s]);
    }
  };

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) mbar_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (tid == 0) {
    for (int t = 0; t < kStages && t < num_tiles; ++t) issue(t, t);
  }

  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;

  for (int t = 0; t < num_tiles; ++t) {
    const int s = t % kStages;
    mbar_wait(&full[s], (t / kStages) & 1);  // the TMA boxes of tile t have landed
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / E::kKStep; ++kk) {
      // A: this warpgroup's 64 rows (8 KB further for warpgroup 1); each k-step is 32 bytes
      // further inside every 128-byte row; SBO = 1024 B between groups of 8 rows.
      const uint64_t da = make_desc(stage_a(s) + wg * 64 * 128 + kk * 32, 16, 1024);
      if constexpr (std::is_same_v<E, Bf16>) {
        // B, N-major: a k-step is 16 k-rows = 2048 B further; LBO = 8192 B to the next
        // 64-column box, SBO = 1024 B between groups of 8 k-rows.
        wgmma_m64n256k16_bf16(d, da, make_desc(stage_b(s) + kk * 2048, 8192, 1024));
      } else {
        // B, K-major like A: 256 rows of 128 bytes, a k-step is 32 bytes further in each row.
        wgmma_m64n256k8_tf32(d, da, make_desc(stage_b(s) + kk * 32, 16, 1024));
      }
    }
    wgmma_commit();
    wgmma_wait<1>();  // the multiplies of tile t - 1 have finished (tile t's may still run)...
    __syncthreads();  // ...in both warpgroups: stage (t - 1) % kStages is free
    if (tid == 0 && t >= 1 && t - 1 + kStages < num_tiles)
      issue(t - 1 + kStages, (t - 1) % kStages);
  }
  wgmma_wait<0>();

  // Epilogue. Register 4j + {0, 1}: row lane / 4, columns 8j + 2 (lane % 4) + {0, 1} of this
  // warp's 16-row slice; registers 4j + {2, 3}: the same columns, 8 rows further down.
  const int rbase = row0 + wg * 64 + warp_in_wg * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    const int col = col0 + 8 * j + 2 * (lane % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = rbase + 8 * h;
      if (row >= m) continue;
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        if (col + q < n) {
          float* out = c + size_t(row) * n + col + q;
          *out = alpha * d[4 * j + 2 * h + q] + (beta != 0.f ? beta * *out : 0.f);
        }
      }
    }
  }
#else
  // Built for an architecture without wgmma: the launcher never calls this.
  (void)m, (void)n, (void)k, (void)alpha, (void)beta, (void)c, (void)map_a, (void)map_b;
#endif
}

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                cudaEnableDefault, &status));
    if (status != cudaDriverEntryPointSuccess || p == nullptr) {
      throw std::runtime_error("cuTensorMapEncodeTiled is not available from the driver");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A row-major rows x cols matrix of T, read in boxes of box_rows x box_cols (box_cols x sizeof(T)
// = 128 bytes: one swizzle span).
template <typename T>
CUtensorMap make_map(const T* ptr, int rows, int cols, int box_rows, int box_cols) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};  // innermost first
  const cuuint64_t strides[1] = {cuuint64_t(cols) * sizeof(T)};
  const cuuint32_t box[2] = {cuuint32_t(box_cols), cuuint32_t(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUtensorMapDataType type =
      std::is_same_v<T, float> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUresult r =
      encode_fn()(&map, type, 2, const_cast<T*>(ptr), dims, strides, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(r));
  }
  return map;
}

void require_sm90() {
  static const bool is_sm90 = [] {
    int device = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major == 9 && minor == 0;
  }();
  if (!is_sm90) throw std::runtime_error("v11 (wgmma) needs a compute capability 9.0 GPU");
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <typename E>
void launch_v11(GemmShape s, float alpha, const CUtensorMap& map_a, const CUtensorMap& map_b,
                float beta, float* c, cudaStream_t stream) {
  static bool attr_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(gemm_v11_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(kSmemBytes)));
    return true;
  }();
  (void)attr_set;
  const dim3 grid(gpu100::ceil_div(s.n, kBN), gpu100::ceil_div(s.m, kBM));
  gemm_v11_kernel<E>
      <<<grid, kThreads, kSmemBytes, stream>>>(s.m, s.n, s.k, alpha, beta, c, map_a, map_b);
  CUDA_CHECK_LAST();
}

}  // namespace

void gemm_v11_wgmma_bf16(GemmShape s, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                         float beta, float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  require_sm90();
  if (s.k % 8 != 0 || s.n % 8 != 0 || !aligned16(a) || !aligned16(b)) {
    gemm_v10_mma_bf16(s, alpha, a, b, beta, c, stream);  // TMA cannot describe these strides
    return;
  }
  launch_v11<Bf16>(s, alpha, make_map(a, s.m, s.k, kBM, Bf16::kBK),
                   make_map(b, s.k, s.n, Bf16::kBK, 64), beta, c, stream);
}

void gemm_v11_wgmma_tf32(GemmShape s, float alpha, const float* a, const float* b, float beta,
                         float* c, cudaStream_t stream) {
  check_gemm_args(s, a, b, c);
  require_sm90();
  if (s.k % 4 != 0 || !aligned16(a)) {
    gemm_v10_mma_tf32(s, alpha, a, b, beta, c, stream);  // TMA cannot describe these strides
    return;
  }
  // B (K x N) -> B^T (N x K) in a scratch buffer that lives as long as the thread and only grows,
  // so that the timed runs allocate nothing.
  thread_local gpu100::DeviceBuffer<float> bt;
  const size_t count = size_t(s.k) * s.n;
  if (bt.size() < count) bt = gpu100::DeviceBuffer<float>(count);
  transpose_v4_padded_tile(b, bt.data(), s.k, s.n, stream);
  launch_v11<Tf32>(s, alpha, make_map(a, s.m, s.k, kBM, Tf32::kBK),
                   make_map(static_cast<const float*>(bt.data()), s.n, s.k, kBN, Tf32::kBK), beta,
                   c, stream);
}

}  // namespace day04
