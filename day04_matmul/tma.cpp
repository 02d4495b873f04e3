// day04 TMA tensor maps (tma.hpp). The driver entry point cuTensorMapEncodeTiled is fetched through
// the runtime (cudaGetDriverEntryPointByVersion), so nothing links libcuda directly.
#include "tma.hpp"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "common/cuda_check.hpp"

namespace day04 {

namespace {

// A driver entry point, in CUDA 12.0's version of its interface (each caller keeps it once).
template <class Fn>
Fn driver_entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || p == nullptr) {
    throw std::runtime_error(std::string(name) + " is not available from the driver");
  }
  return reinterpret_cast<Fn>(p);
}

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const auto fn = driver_entry<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled");
  return fn;
}

PFN_cuTensorMapEncodeIm2col_v12000 encode_im2col_fn() {
  static const auto fn =
      driver_entry<PFN_cuTensorMapEncodeIm2col_v12000>("cuTensorMapEncodeIm2col");
  return fn;
}

// dims and box innermost first; strides in bytes for dimensions 1.. (dimension 0 is contiguous).
CUtensorMap encode(CUtensorMapDataType type, int rank, const void* ptr, const cuuint64_t* dims,
                   const cuuint64_t* strides, const cuuint32_t* box,
                   CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  CUtensorMap map{};
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  const CUresult r =
      encode_fn()(&map, type, rank, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(r));
  }
  return map;
}

template <typename T>
CUtensorMap map_2d(CUtensorMapDataType type, const T* ptr, int rows, int cols, int box_rows,
                   int box_cols) {
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(cols) * sizeof(T)};
  const cuuint32_t box[2] = {cuuint32_t(box_cols), cuuint32_t(box_rows)};
  return encode(type, 2, ptr, dims, strides, box);
}

}  // namespace

CUtensorMap make_tma_map_2d(const float* ptr, int rows, int cols, int box_rows, int box_cols) {
  return map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, ptr, rows, cols, box_rows, box_cols);
}

CUtensorMap make_tma_map_2d(const __nv_bfloat16* ptr, int rows, int cols, int box_rows,
                            int box_cols) {
  return map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, ptr, rows, cols, box_rows, box_cols);
}

// TMA moves bytes: an e4m3 matrix is described as UINT8 (the copy never looks at the values).
CUtensorMap make_tma_map_2d(const __nv_fp8_e4m3* ptr, int rows, int cols, int box_rows,
                            int box_cols) {
  return map_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, ptr, rows, cols, box_rows, box_cols);
}

namespace {
template <typename T>
CUtensorMap map_3d(CUtensorMapDataType type, const T* ptr, long long batches, int rows, int cols,
                   int box_rows, int box_cols,
                   CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  const cuuint64_t dims[3] = {cuuint64_t(cols), cuuint64_t(rows), cuuint64_t(batches)};
  const cuuint64_t row_bytes = cuuint64_t(cols) * sizeof(T);
  const cuuint64_t strides[2] = {row_bytes, row_bytes * cuuint64_t(rows)};
  const cuuint32_t box[3] = {cuuint32_t(box_cols), cuuint32_t(box_rows), 1};
  return encode(type, 3, ptr, dims, strides, box, swizzle);
}
}  // namespace

CUtensorMap make_tma_map_3d(const __nv_bfloat16* ptr, long long batches, int rows, int cols,
                            int box_rows, int box_cols) {
  return map_3d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, ptr, batches, rows, cols, box_rows, box_cols);
}

CUtensorMap make_tma_map_3d(const float* ptr, long long batches, int rows, int cols, int box_rows,
                            int box_cols, bool swizzle_128b) {
  return map_3d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, ptr, batches, rows, cols, box_rows, box_cols,
                swizzle_128b ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE);
}

namespace {
// A 4D map: dims and box innermost first, strides in elements for dimensions 1..3.
template <typename T>
CUtensorMap map_4d(CUtensorMapDataType type, const T* ptr, const long long (&dims)[4],
                   const long long (&strides)[3], const int (&box)[4], CUtensorMapSwizzle swizzle) {
  cuuint64_t d[4], st[3];
  cuuint32_t b[4];
  for (int i = 0; i < 4; ++i) {
    d[i] = cuuint64_t(dims[i]);
    b[i] = cuuint32_t(box[i]);
  }
  for (int i = 0; i < 3; ++i) st[i] = cuuint64_t(strides[i]) * sizeof(T);
  return encode(type, 4, ptr, d, st, b, swizzle);
}
}  // namespace

CUtensorMap make_tma_map_4d(const __nv_bfloat16* ptr, const long long (&dims)[4],
                            const long long (&strides)[3], const int (&box)[4]) {
  return map_4d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, ptr, dims, strides, box,
                CU_TENSOR_MAP_SWIZZLE_128B);
}

CUtensorMap make_tma_map_4d(const float* ptr, const long long (&dims)[4],
                            const long long (&strides)[3], const int (&box)[4], bool swizzle_128b) {
  return map_4d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, ptr, dims, strides, box,
                swizzle_128b ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE);
}

namespace {
template <typename T>
CUtensorMap im2col_nhwc(CUtensorMapDataType type, const T* ptr, int n, int h, int w, int c,
                        int lower_h, int lower_w, int upper_h, int upper_w, int stride_h,
                        int stride_w, int pixels, int channels) {
  // Dimensions innermost first (c, w, h, n), and the corners and strides in the same order.
  const cuuint64_t dims[4] = {cuuint64_t(c), cuuint64_t(w), cuuint64_t(h), cuuint64_t(n)};
  const cuuint64_t row = cuuint64_t(c) * sizeof(T);
  const cuuint64_t strides[3] = {row, row * cuuint64_t(w), row * cuuint64_t(w) * cuuint64_t(h)};
  const int lower[2] = {lower_w, lower_h}, upper[2] = {upper_w, upper_h};
  const cuuint32_t elem_strides[4] = {1, cuuint32_t(stride_w), cuuint32_t(stride_h), 1};
  CUtensorMap map{};
  const CUresult r = encode_im2col_fn()(
      &map, type, 4, const_cast<T*>(ptr), dims, strides, lower, upper, cuuint32_t(channels),
      cuuint32_t(pixels), elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error("cuTensorMapEncodeIm2col failed with CUresult " + std::to_string(r));
  }
  return map;
}
}  // namespace

CUtensorMap make_tma_map_im2col_nhwc(const __nv_bfloat16* ptr, int n, int h, int w, int c,
                                     int lower_h, int lower_w, int upper_h, int upper_w,
                                     int stride_h, int stride_w, int pixels, int channels) {
  return im2col_nhwc(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, ptr, n, h, w, c, lower_h, lower_w, upper_h,
                     upper_w, stride_h, stride_w, pixels, channels);
}

CUtensorMap make_tma_map_im2col_nhwc(const float* ptr, int n, int h, int w, int c, int lower_h,
                                     int lower_w, int upper_h, int upper_w, int stride_h,
                                     int stride_w, int pixels, int channels) {
  return im2col_nhwc(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, ptr, n, h, w, c, lower_h, lower_w, upper_h,
                     upper_w, stride_h, stride_w, pixels, channels);
}

}  // namespace day04
