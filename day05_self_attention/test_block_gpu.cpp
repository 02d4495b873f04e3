// day05 GPU tests of the attention block (block.hpp): every QKV-stage and block variant against the
// double CPU reference at awkward shapes (S = 1, 17, 130, 1031; B = 1, 2; H = 1, 3; d_model 192,
// 200 and 100, the last refused by the TMA path; D = 64 and 128; both RoPE pairings; causal and
// not), the flash kernels' token-major O against their [B, H, S, D] O, the transposition, and the
// refusals. Every output is poisoned with NaN before each launch.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "block.hpp"
#include "common/catch.hpp"
#include "common/cuda_check.hpp"
#include "common/half.hpp"
#include "common/random.hpp"

namespace {

using bf16 = __nv_bfloat16;
using day01::RopeStyle;
using day05::BlockShape;
using day05::BlockTensors;
using day05::BlockVariant;

BlockShape block_shape(int b, int s, int d_model, int h, int d, bool causal, RopeStyle style) {
  BlockShape x;
  x.b = b, x.s = s, x.d_model = d_model, x.h = h, x.d = d, x.causal = causal, x.style = style;
  return x;
}

std::vector<float> to_float(const gpu100::DeviceBuffer<bf16>& b) {
  return gpu100::convert_to_float(b.download());
}

// The tokens checked: all of them up to 80, else 40 spread over the range, the first and the last
// included.
std::vector<int64_t> checked_tokens(const BlockShape& s) {
  std::vector<int64_t> rows;
  const int64_t n = s.tokens();
  if (n <= 80) {
    for (int64_t r = 0; r < n; ++r) rows.push_back(r);
  } else {
    for (int i = 0; i < 40; ++i) rows.push_back(i * (n - 1) / 39);
  }
  return rows;
}

// Runs `var` once at shape s on fresh inputs and checks its output at the checked tokens.
void check_block_variant(const BlockVariant& var, const BlockShape& s, uint64_t seed) {
  INFO(var.name << " at " << day05::block_label(s));
  const day05::BlockInputs in = day05::make_block_inputs(s, seed);
  BlockTensors t(s);
  day05::upload_block_inputs(t, in.x, in.w_qkv, in.w_o);
  for (auto* b : {&t.q, &t.k, &t.v, &t.scratch, &t.o, &t.o_tok, &t.y}) b->poison();
  t.workspace.poison();
  var.run(t, nullptr);
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  const size_t hd3 = size_t(3 * s.hd()), dm = size_t(s.d_model);
  gpu100::CompareResult c;
  if (var.projection) {
    const std::vector<float> out = to_float(t.scratch);
    for (int64_t row : checked_tokens(s)) {
      std::vector<double> p, abs_p, qkv;
      day05::qkv_row_cpu(s, in, row, p, abs_p, qkv);
      day05::check_projection_row(
          p, abs_p, std::vector<float>(out.begin() + row * hd3, out.begin() + (row + 1) * hd3), c);
    }
    INFO(c.summary());
    REQUIRE(c.ok);
    return;
  }
  const std::vector<float> q = to_float(t.q), k = to_float(t.k), v = to_float(t.v);
  for (int64_t row : checked_tokens(s)) {
    std::vector<double> p, abs_p, qkv;
    day05::qkv_row_cpu(s, in, row, p, abs_p, qkv);
    day05::check_qkv_row(s, row, p, abs_p, qkv, q, k, v, c);
  }
  INFO("Q, K, V: " << c.summary());
  REQUIRE(c.ok);
  if (!var.is_block) return;
  const std::vector<float> y = to_float(t.y);
  gpu100::CompareResult cy;
  for (int64_t row : checked_tokens(s)) {
    std::vector<double> yr, y_abs;
    day05::block_row_cpu(s, in, q, k, v, row, yr, y_abs);
    day05::check_block_row(
        yr, y_abs, std::vector<float>(y.begin() + row * dm, y.begin() + (row + 1) * dm), cy);
  }
  INFO("Y: " << cy.summary());
  REQUIRE(cy.ok);
}

}  // namespace

TEST_CASE("every attention-block variant matches the CPU at awkward shapes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // (B, S, d_model, H, D): S = 1 (one key), 17 and 130 (tails in the 128-row tiles, tiles across
  // two sequences), 1031 (many tiles, a ragged last one); d_model 192 and 200 (a k-tail in the 64-
  // wide k-tiles), and 100 (d_model % 8 != 0: qkv_rope_wgmma refuses, block_fused scatters).
  struct Case {
    int b, s, dm, h, d;
  };
  const Case cases[] = {{1, 1, 192, 1, 64},    {1, 17, 200, 3, 64},   {2, 17, 192, 3, 128},
                        {2, 130, 200, 1, 128}, {1, 1031, 192, 2, 64}, {1, 40, 100, 2, 128}};
  uint64_t seed = 800;
  for (const auto& var : day05::block_variants()) {
    if (gpu100::lacks_code(var)) continue;
    for (const Case& k : cases) {
      for (RopeStyle style : {RopeStyle::kHalfSplit, RopeStyle::kInterleaved}) {
        for (bool causal : {true, false}) {
          const BlockShape s = block_shape(k.b, k.s, k.dm, k.h, k.d, causal, style);
          if (gpu100::test_sizes({s.tokens() * s.d_model}).empty()) continue;
          if (!var.refusal(s).empty()) continue;  // the refusal has its own test case
          check_block_variant(var, s, seed += 7);
        }
      }
    }
  }
}

TEST_CASE("v4 and v5 write the same O token-major as [B, H, S, D]", "[gpu]") {
  GPU100_REQUIRE_GPU();
  for (const char* name : {"v4_flash_bf16", "v5_flash_wgmma"}) {
    const auto* var = day05::find_variant(name);
    REQUIRE(var != nullptr);
    if (gpu100::lacks_code(*var)) continue;
    for (int s : {17, 1031})
      for (int d : {64, 128})
        for (bool causal : {false, true}) {
          day05::AttentionShape a{2, 3, s, d, causal};
          INFO(name << " " << day05::shape_label(a));
          const size_t n = size_t(a.elements());
          gpu100::DeviceBuffer<bf16> q(n), k(n), v(n), o(n), o_tok(n);
          q.upload(gpu100::convert_from_float<bf16>(gpu100::random_vector<float>(n, 900 + s)));
          k.upload(gpu100::convert_from_float<bf16>(gpu100::random_vector<float>(n, 901 + s)));
          v.upload(gpu100::convert_from_float<bf16>(gpu100::random_vector<float>(n, 902 + s)));
          gpu100::DeviceBuffer<char> ws(day05::flash_workspace_bytes(a));
          o.poison(), o_tok.poison();
          auto launch =
              std::string(name) == "v4_flash_bf16"
                  ? static_cast<void (*)(const day05::AttentionShape&, const bf16*, const bf16*,
                                         const bf16*, bf16*, day05::OLayout, void*, size_t,
                                         cudaStream_t)>(day05::attention_v4_flash_bf16)
                  : static_cast<void (*)(const day05::AttentionShape&, const bf16*, const bf16*,
                                         const bf16*, bf16*, day05::OLayout, void*, size_t,
                                         cudaStream_t)>(day05::attention_v5_flash_wgmma);
          launch(a, q.data(), k.data(), v.data(), o.data(), day05::OLayout::kBHSD, ws.data(),
                 ws.bytes(), nullptr);
          launch(a, q.data(), k.data(), v.data(), o_tok.data(), day05::OLayout::kBSHD, ws.data(),
                 ws.bytes(), nullptr);
          CUDA_CHECK(cudaDeviceSynchronize());
          const std::vector<float> bhsd = to_float(o), bshd = to_float(o_tok);
          size_t bad = 0;
          for (int b = 0; b < a.b; ++b)
            for (int h = 0; h < a.h; ++h)
              for (int i = 0; i < s; ++i)
                for (int e = 0; e < d; ++e) {
                  const float x = bhsd[((size_t(b) * a.h + h) * s + i) * d + e];
                  const float y = bshd[((size_t(b) * s + i) * a.h + h) * d + e];
                  if (!(x == y)) ++bad;  // the same kernel, the same math: equal bits (no NaN)
                }
          REQUIRE(bad == 0);
        }
  }
}

TEST_CASE("swap_middle_bf16 transposes the middle two axes exactly", "[gpu]") {
  GPU100_REQUIRE_GPU();
  for (int d : {8, 64, 128}) {
    const int b = 2, i = 7, j = 5;
    const size_t n = size_t(b) * i * j * d;
    const std::vector<float> x = gpu100::round_trip<bf16>(gpu100::random_vector<float>(n, 950 + d));
    gpu100::DeviceBuffer<bf16> in(n), out(n);
    in.upload(gpu100::convert_from_float<bf16>(x));
    out.poison();
    day05::swap_middle_bf16(in.data(), out.data(), b, i, j, d, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> y = to_float(out);
    size_t bad = 0;
    for (int bb = 0; bb < b; ++bb)
      for (int ii = 0; ii < i; ++ii)
        for (int jj = 0; jj < j; ++jj)
          for (int e = 0; e < d; ++e) {
            if (!(y[((size_t(bb) * j + jj) * i + ii) * d + e] ==
                  x[((size_t(bb) * i + ii) * j + jj) * d + e])) {
              ++bad;
            }
          }
    REQUIRE(bad == 0);
  }
}

TEST_CASE("the block's refusals come before any launch", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // d_model % 8 != 0: the TMA path refuses with the reason (the fused block takes the other path).
  const BlockShape odd = block_shape(1, 16, 100, 1, 64, true, RopeStyle::kHalfSplit);
  BlockTensors t(odd);
  CHECK_THROWS_AS(day05::qkv_rope_wgmma(t, nullptr), std::invalid_argument);
  CHECK(std::string(day05::block_fused_qkv(odd)) == "qkv_gemm_rope_scatter");
  // A head dimension the flash kernels lack, before any allocation.
  CHECK_THROWS_AS(BlockTensors(block_shape(1, 16, 64, 1, 96, true, RopeStyle::kHalfSplit)),
                  std::invalid_argument);
  // Misaligned tensors for the transposition.
  gpu100::DeviceBuffer<bf16> buf(64 * 8 + 8);
  CHECK_THROWS_AS(day05::swap_middle_bf16(buf.data() + 1, buf.data(), 1, 8, 8, 8, nullptr),
                  std::invalid_argument);
  CUDA_CHECK(cudaDeviceSynchronize());
}

TEST_CASE("attention-block variants this build lacks for this GPU are reported as skipped",
          "[gpu]") {
  GPU100_REQUIRE_GPU();
  GPU100_SKIP_LACKED(day05::block_variants());
}
