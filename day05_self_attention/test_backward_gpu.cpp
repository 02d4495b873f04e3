// day05 GPU tests of the backward pass: every backward variant against the double CPU reference at
// awkward sizes (S = 1, 77, 777, 1031; D = 64 and 128, and D = 40; causal and not; two heads, or
// B = 2 x H = 3), bwd v1's head chunks at its S x S budget, and cuDNN's workspace refusal. The
// inputs O and lse come from the GPU's forward as in training (v3 for the fp32 rows, the fastest
// bf16 flash kernel for the bf16 rows; at a D that kernel does not take, D = 40, the CPU forward's,
// rounded to bf16). Outputs and workspaces are poisoned with NaN before every launch.
// Tolerances (README, "The backward ladder"): |got - ref| <= tol * abs_dX, tol = 5e-5 in fp32,
// 2e-2 in bf16 (against the reference on the bf16-rounded Q, K, V and dO). The training step
// (forward then backward, attention_backward.hpp), own and cuDNN's, at S = 777.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_backward.hpp"
#include "test_suite.hpp"

using namespace day05_tests;

namespace {

struct Gradients {
  std::vector<float> dq, dk, dv;
};

template <class T>
std::vector<T> to_device_type(const std::vector<float>& x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return gpu100::convert_from_float<T>(x);
  }
}
template <class T>
std::vector<float> to_host_float(const gpu100::DeviceBuffer<T>& x) {
  if constexpr (std::is_same_v<T, float>) {
    return x.download();
  } else {
    return gpu100::convert_to_float(x.download());
  }
}

// The GPU forward's O and lse for the backward (see the file's opening comment).
template <class T>
void forward(const day05::AttentionShape& s, const std::vector<float>& q,
             const std::vector<float>& k, const std::vector<float>& v, const T* in_q, const T* in_k,
             const T* in_v, gpu100::DeviceBuffer<T>& o, gpu100::DeviceBuffer<float>& lse) {
  if constexpr (std::is_same_v<T, float>) {
    day05::attention_v3_flash_fp32(s, in_q, in_k, in_v, o.data(), lse.data(), lse.bytes(), nullptr);
  } else if (day05::find_variant(day05::best_flash_bf16())->refusal(s).empty()) {
    day05::attention_flash_bf16(s, in_q, in_k, in_v, o.data(), day05::OLayout::kBHSD, lse.data(),
                                lse.bytes(), nullptr);
  } else {
    const auto ref = day05::attention_cpu(s, gpu100::round_trip<bf16>(q),
                                          gpu100::round_trip<bf16>(k), gpu100::round_trip<bf16>(v));
    o.upload(gpu100::convert_from_float<bf16>(std::vector<float>(ref.o.begin(), ref.o.end())));
    lse.upload(std::vector<float>(ref.lse.begin(), ref.lse.end()));
  }
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
}

template <class T>
Gradients run_backward(const day05::AttentionBackwardVariant& var, const day05::AttentionShape& s,
                       const std::vector<float>& q, const std::vector<float>& k,
                       const std::vector<float>& v, const std::vector<float>& dout) {
  const size_t n = q.size();
  gpu100::DeviceBuffer<T> in_q(n), in_k(n), in_v(n), in_do(n), o(n), dq(n), dk(n), dv(n);
  gpu100::DeviceBuffer<float> lse(static_cast<size_t>(s.rows()));
  in_q.upload(to_device_type<T>(q));
  in_k.upload(to_device_type<T>(k));
  in_v.upload(to_device_type<T>(v));
  in_do.upload(to_device_type<T>(dout));
  o.poison(), lse.poison();
  forward<T>(s, q, k, v, in_q.data(), in_k.data(), in_v.data(), o, lse);
  const size_t ws_bytes = var.workspace_bytes(s);
  gpu100::DeviceBuffer<char> ws(std::max<size_t>(ws_bytes, 256));
  ws.poison(), dq.poison(), dk.poison(), dv.poison();
  day05::BackwardTensors<T> t;
  t.q = in_q.data(), t.k = in_k.data(), t.v = in_v.data(), t.o = o.data(), t.dout = in_do.data();
  t.lse = lse.data(), t.dq = dq.data(), t.dk = dk.data(), t.dv = dv.data();
  if constexpr (std::is_same_v<T, float>) {
    var.fp32(s, t, ws.data(), ws_bytes, nullptr);
  } else {
    var.bf16(s, t, ws.data(), ws_bytes, nullptr);
  }
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  return {to_host_float(dq), to_host_float(dk), to_host_float(dv)};
}

Gradients run_backward(const day05::AttentionBackwardVariant& var, const day05::AttentionShape& s,
                       const std::vector<float>& q, const std::vector<float>& k,
                       const std::vector<float>& v, const std::vector<float>& dout) {
  return var.precision == day05::Precision::kFp32 ? run_backward<float>(var, s, q, k, v, dout)
                                                  : run_backward<bf16>(var, s, q, k, v, dout);
}

// One variant at one shape against the CPU reference (on the rounded inputs for bf16).
void check_backward(const day05::AttentionBackwardVariant& var, const day05::AttentionShape& s,
                    uint64_t seed) {
  INFO(var.name << " at " << day05::shape_label(s));
  const size_t n = static_cast<size_t>(s.elements());
  auto q = gpu100::random_vector<float>(n, seed);
  auto k = gpu100::random_vector<float>(n, seed + 1);
  auto v = gpu100::random_vector<float>(n, seed + 2);
  auto dout = gpu100::random_vector<float>(n, seed + 3);
  const Gradients got = run_backward(var, s, q, k, v, dout);
  if (var.precision == day05::Precision::kBf16) {
    for (auto* x : {&q, &k, &v, &dout}) *x = gpu100::round_trip<bf16>(*x);
  }
  const auto ref = day05::attention_backward_cpu(s, q, k, v, dout);
  const double tol = day05::backward_tolerance(var.precision);
  const auto cq = day05::check_output(ref.dq, ref.abs_dq, got.dq, tol);
  const auto ck = day05::check_output(ref.dk, ref.abs_dk, got.dk, tol);
  const auto cv = day05::check_output(ref.dv, ref.abs_dv, got.dv, tol);
  INFO("dQ: " << cq.summary());
  INFO("dK: " << ck.summary());
  INFO("dV: " << cv.summary());
  REQUIRE(cq.ok);
  REQUIRE(ck.ok);
  REQUIRE(cv.ok);
}

// The shapes of the matrix: S = 1, 77, 777 with two heads, S = 1031 with one, B = 2 x H = 3 at
// S = 77, D = 40 at S = 77; each causal and not. Capped by GPU100_TEST_MAX_N (elements of Q).
std::vector<day05::AttentionShape> backward_shapes() {
  std::vector<day05::AttentionShape> shapes;
  for (bool causal : {false, true}) {
    for (int d : {64, 128}) {
      for (int s : {1, 77, 777}) shapes.push_back(shape(1, 2, s, d, causal));
      shapes.push_back(shape(1, 1, 1031, d, causal));
    }
    shapes.push_back(shape(2, 3, 77, 64, causal));
    shapes.push_back(shape(1, 2, 77, 40, causal));
  }
  std::vector<day05::AttentionShape> kept;
  for (const auto& sh : shapes) {
    if (!gpu100::test_sizes({sh.elements()}).empty()) kept.push_back(sh);
  }
  return kept;
}

// Every shape of the matrix the variant takes; returns how many ran. A shape it refuses must say
// why in one line.
int check_backward_matrix(const char* name, uint64_t seed) {
  const auto* var = day05::find_backward_variant(name);
  REQUIRE(var != nullptr);
  int ran = 0;
  for (const auto& sh : backward_shapes()) {
    if (const std::string why = var->refusal(sh); !why.empty()) {
      INFO(name << " refuses " << day05::shape_label(sh) << ": " << why);
      CHECK(why.find('\n') == std::string::npos);
      continue;
    }
    check_backward(*var, sh, seed += 5);
    ++ran;
  }
  return ran;
}

// How many shapes of the matrix the flash backwards (bwd v2, v2b, v3) take: every one with D = 64
// or 128 (not D = 40).
int flash_shapes() {
  const auto shapes = backward_shapes();
  return static_cast<int>(
      std::count_if(shapes.begin(), shapes.end(),
                    [](const day05::AttentionShape& x) { return x.d == 64 || x.d == 128; }));
}
// How many shapes of the matrix bwd v2c and v2d take on this GPU: those flash_shapes() counts,
// less the D = 128 ones where `refusal` says the GPU's blocks get too little shared memory (in one
// line); every D = 64 shape runs.
int wide_shapes(std::string (*refusal)(const day05::AttentionShape&)) {
  const auto shapes = backward_shapes();
  int n = 0;
  for (const auto& x : shapes) {
    if (x.d != 64 && x.d != 128) continue;
    const std::string why = refusal(x);
    if (x.d == 64 || why.empty()) {
      CHECK(why.empty());
      ++n;
    } else {
      CHECK(why.find("shared memory per block") != std::string::npos);
    }
  }
  return n;
}
}  // namespace

TEST_CASE("bwd_v1_cublas_fp32 matches the CPU at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_GPU();
  CHECK(check_backward_matrix("bwd_v1_cublas_fp32", 800) == int(backward_shapes().size()));
}

TEST_CASE("bwd_v1_cublas matches the CPU at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_backward_variant("bwd_v1_cublas")->needs, "bwd_v1_cublas");
  CHECK(check_backward_matrix("bwd_v1_cublas", 900) == int(backward_shapes().size()));
}

TEST_CASE("bwd_v2_flash_mma matches the CPU at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_backward_variant("bwd_v2_flash_mma")->needs, "bwd_v2_flash_mma");
  // Every shape but D = 40 (D must be 64 or 128): S = 1, 77, 777 and 1031 are no multiple of its
  // 64-key and 64-query tiles, so every run has tails.
  CHECK(check_backward_matrix("bwd_v2_flash_mma", 1200) == flash_shapes());
}

TEST_CASE("bwd_v2b_flash_mma_dq_pass matches the CPU at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_backward_variant("bwd_v2b_flash_mma_dq_pass")->needs,
                       "bwd_v2b_flash_mma_dq_pass");
  CHECK(check_backward_matrix("bwd_v2b_flash_mma_dq_pass", 1300) == flash_shapes());
}

TEST_CASE("bwd_v2c_flash_mma_128_keys matches the CPU at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_backward_variant("bwd_v2c_flash_mma_128_keys")->needs,
                       "bwd_v2c_flash_mma_128_keys");
  // S = 1, 77, 777 and 1031 are no multiple of its 128-key blocks: every run has key tails. D = 128
  // only where the GPU gives a block the shared memory its tiling takes (not sm_86 / sm_89).
  CHECK(check_backward_matrix("bwd_v2c_flash_mma_128_keys", 1500) ==
        wide_shapes(day05::bwd_v2c_refusal));
}

TEST_CASE("bwd_v2d_flash_mma_vector_red matches the CPU at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_backward_variant("bwd_v2d_flash_mma_vector_red")->needs,
                       "bwd_v2d_flash_mma_vector_red");
  CHECK(check_backward_matrix("bwd_v2d_flash_mma_vector_red", 1550) ==
        wide_shapes(day05::bwd_v2d_refusal));
}

TEST_CASE("bwd_v3_flash_wgmma matches the CPU at awkward sizes", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_backward_variant("bwd_v3_flash_wgmma")->needs,
                       "bwd_v3_flash_wgmma");
  // Every shape but D = 40: S = 1, 77, 777 and 1031 are no multiple of its 128-key blocks or its
  // 64-query tiles (nor of the 64 its lse and D_i rows are padded to), so every run has tails.
  CHECK(check_backward_matrix("bwd_v3_flash_wgmma", 1400) == flash_shapes());
}

TEST_CASE("bwd_v3_flash_wgmma under the causal mask with more heads than a band", "[gpu]") {
  // Causal, bwd v3 starts its key blocks in bands of kCausalBand (8) heads: 19 heads (and 2 x 10)
  // are two whole bands and a partial one, so every head's blocks must still be found once.
  GPU100_REQUIRE_BUILD(day05::find_backward_variant("bwd_v3_flash_wgmma")->needs,
                       "bwd_v3_flash_wgmma");
  const auto* var = day05::find_backward_variant("bwd_v3_flash_wgmma");
  uint64_t seed = 1600;
  int ran = 0;
  for (const auto& sh :
       {shape(1, 19, 300, 64, true), shape(1, 19, 300, 128, true), shape(2, 10, 200, 128, true)}) {
    if (gpu100::test_sizes({sh.elements()}).empty()) continue;
    check_backward(*var, sh, seed += 5);
    ++ran;
  }
  // Under a small GPU100_TEST_MAX_N (the sanitizer runs) every shape is capped: say so.
  if (ran == 0) GPU100_SKIP("every shape is over GPU100_TEST_MAX_N");
}

TEST_CASE("bwd_v2_flash_mma, v2b, v2c and v2d refuse a D they have no tiling for", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_backward_variant("bwd_v2_flash_mma")->needs, "bwd_v2_flash_mma");
  const auto sh = shape(1, 2, 77, 40, false);
  const size_t n = static_cast<size_t>(sh.elements());
  gpu100::DeviceBuffer<bf16> t(n);
  gpu100::DeviceBuffer<float> lse(static_cast<size_t>(sh.rows()));
  gpu100::DeviceBuffer<char> ws(day05::bwd_v2_workspace_bytes(sh));
  day05::BackwardTensors<bf16> bt;
  bt.q = bt.k = bt.v = bt.o = bt.dout = t.data();
  bt.dq = bt.dk = bt.dv = t.data();
  bt.lse = lse.data();
  CHECK_THROWS_AS(day05::attention_bwd_v2_flash_mma(sh, bt, ws.data(), ws.bytes(), nullptr),
                  std::invalid_argument);
  CHECK(day05::bwd_v2_refusal(sh).find("D must be 64 or 128") != std::string::npos);
  CHECK_THROWS_AS(
      day05::attention_bwd_v2b_flash_mma_dq_pass(sh, bt, ws.data(), ws.bytes(), nullptr),
      std::invalid_argument);
  CHECK_THROWS_AS(
      day05::attention_bwd_v2c_flash_mma_128_keys(sh, bt, ws.data(), ws.bytes(), nullptr),
      std::invalid_argument);
  CHECK(day05::bwd_v2c_refusal(sh).find("D must be 64 or 128") != std::string::npos);
  if (gpu100::build_has(day05::find_backward_variant("bwd_v2d_flash_mma_vector_red")->needs)) {
    CHECK_THROWS_AS(
        day05::attention_bwd_v2d_flash_mma_vector_red(sh, bt, ws.data(), ws.bytes(), nullptr),
        std::invalid_argument);
  }
}

TEST_CASE("bwd_v3_flash_wgmma refuses a D it has no tiling for", "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_backward_variant("bwd_v3_flash_wgmma")->needs,
                       "bwd_v3_flash_wgmma");
  const auto sh = shape(1, 2, 77, 40, false);
  const size_t n = static_cast<size_t>(sh.elements());
  gpu100::DeviceBuffer<bf16> t(n);
  gpu100::DeviceBuffer<float> lse(static_cast<size_t>(sh.rows()));
  gpu100::DeviceBuffer<char> ws(day05::bwd_v3_workspace_bytes(sh));
  day05::BackwardTensors<bf16> bt;
  bt.q = bt.k = bt.v = bt.o = bt.dout = t.data();
  bt.dq = bt.dk = bt.dv = t.data();
  bt.lse = lse.data();
  CHECK_THROWS_AS(day05::attention_bwd_v3_flash_wgmma(sh, bt, ws.data(), ws.bytes(), nullptr),
                  std::invalid_argument);
  CHECK(day05::bwd_v3_refusal(sh).find("D must be 64 or 128") != std::string::npos);
}

TEST_CASE("cudnn_sdpa_bwd (cuDNN's fused backward, the bf16 library row) matches the CPU",
          "[gpu]") {
  GPU100_REQUIRE_BUILD(day05::find_backward_variant("cudnn_sdpa_bwd")->needs, "cudnn_sdpa_bwd");
  if (!day05::have_cudnn_sdpa()) {
    GPU100_SKIP(
        "built without the cuDNN frontend (scripts/setup.sh fetches it where the network allows)");
  }
  if (gpu100::sanitizer_run()) GPU100_SKIP("cuDNN's kernels are not ours to sanitize");
  // cuDNN refuses S = 1 (its frontend: "s_q = s_kv = 1 is not supported"); it must run the rest.
  const auto shapes = backward_shapes();
  const auto longer = std::count_if(shapes.begin(), shapes.end(),
                                    [](const day05::AttentionShape& x) { return x.s > 1; });
  CHECK(check_backward_matrix("cudnn_sdpa_bwd", 1000) >= int(longer));
  // Its workspace is checked before any launch.
  const auto sh = shape(1, 2, 77, 64, false);
  const size_t need = day05::cudnn_sdpa_backward_workspace_bytes(sh);
  if (need > 0) {
    gpu100::DeviceBuffer<bf16> t(static_cast<size_t>(sh.elements()));
    gpu100::DeviceBuffer<float> lse(static_cast<size_t>(sh.rows()));
    gpu100::DeviceBuffer<char> ws(need);
    day05::BackwardTensors<bf16> bt;
    bt.q = bt.k = bt.v = bt.o = bt.dout = t.data();
    bt.dq = bt.dk = bt.dv = t.data();
    bt.lse = lse.data();
    CHECK_THROWS_AS(day05::attention_cudnn_sdpa_backward(sh, bt, ws.data(), need - 1, nullptr),
                    std::invalid_argument);
  }
}

TEST_CASE("bwd_v1 takes the heads in chunks at its S x S budget", "[gpu]") {
  GPU100_REQUIRE_GPU();
  // S = 8192: one head's fp32 scores and P take 384 MiB in the bf16 form (10 heads per 4 GiB
  // chunk) and 512 MiB in fp32 (8 per chunk), so 11 heads run in two chunks. Every head gets the
  // same Q, K and V, and head h the dO of head 0 times 2^(h mod 3), an exact scaling in fp32 and
  // bf16: the gradients are linear in dO, so head h's must be head 0's times 2^(h mod 3) (within
  // the variant's tolerance of the largest value: the chunks' GEMMs may round differently), which
  // a chunk reading or writing another head's rows would break; no element may stay NaN.
  const auto sh = shape(1, 11, 8192, 64, false);
  if (gpu100::test_sizes({sh.elements()}).empty()) GPU100_SKIP("over GPU100_TEST_MAX_N");
  const size_t head = size_t(sh.s) * sh.d;
  auto factor = [](int64_t h) { return float(1 << (h % 3)); };
  auto heads = [&](uint64_t seed, bool scaled) {
    const auto x = gpu100::random_vector<float>(head, seed);
    std::vector<float> all;
    for (int64_t h = 0; h < sh.heads(); ++h) {
      for (float y : x) all.push_back(scaled ? y * factor(h) : y);
    }
    return all;
  };
  const auto q = heads(1100, false), k = heads(1101, false), v = heads(1102, false),
             dout = heads(1103, true);
  for (const char* name : {"bwd_v1_cublas_fp32", "bwd_v1_cublas"}) {
    const auto* var = day05::find_backward_variant(name);
    REQUIRE(var != nullptr);
    if (gpu100::lacks_code(*var)) continue;
    INFO(name);
    const size_t eb = var->precision == day05::Precision::kFp32 ? 4 : 2;
    REQUIRE(day05::bwd_v1_heads_per_chunk(sh, eb) == (eb == 4 ? 8 : 10));
    const Gradients g = run_backward(*var, sh, q, k, v, dout);
    for (const std::vector<float>* x : {&g.dq, &g.dk, &g.dv}) {
      const std::vector<float> first(x->begin(), x->begin() + head);
      double largest = 0;
      for (float y : first) largest = std::max(largest, double(std::fabs(y)));
      REQUIRE(largest > 0);
      for (int64_t h = 1; h < sh.heads(); ++h) {
        INFO("head " << h);
        std::vector<float> want(first);
        for (float& y : want) y *= factor(h);
        const std::vector<float> mine(x->begin() + h * head, x->begin() + (h + 1) * head);
        const double tol = day05::backward_tolerance(var->precision) * largest * factor(h);
        const auto cmp = gpu100::compare(want, mine, tol, 0.0);
        INFO(cmp.summary());
        REQUIRE(cmp.ok);
      }
    }
  }
}

namespace {
// One training step (attention_backward.hpp) on fresh inputs, outputs and workspaces poisoned with
// NaN: O and the log-sum-exp against the forward's CPU reference, the gradients against the
// backward's, both on the bf16-rounded inputs, with the forward's and the backward's bf16
// tolerances.
void check_training_step(const day05::TrainingStep& step, const day05::AttentionShape& s,
                         uint64_t seed) {
  INFO(step.name() << " at " << day05::shape_label(s));
  REQUIRE(step.refusal(s).empty());
  const size_t n = static_cast<size_t>(s.elements());
  auto q = gpu100::random_vector<float>(n, seed);
  auto k = gpu100::random_vector<float>(n, seed + 1);
  auto v = gpu100::random_vector<float>(n, seed + 2);
  auto dout = gpu100::random_vector<float>(n, seed + 3);
  gpu100::DeviceBuffer<bf16> in_q(n), in_k(n), in_v(n), in_do(n), o(n), dq(n), dk(n), dv(n);
  in_q.upload(gpu100::convert_from_float<bf16>(q));
  in_k.upload(gpu100::convert_from_float<bf16>(k));
  in_v.upload(gpu100::convert_from_float<bf16>(v));
  in_do.upload(gpu100::convert_from_float<bf16>(dout));
  const size_t fwd_bytes = step.forward_workspace_bytes(s),
               bwd_bytes = step.backward_workspace_bytes(s);
  gpu100::DeviceBuffer<char> fwd_ws(std::max<size_t>(fwd_bytes, 256)),
      bwd_ws(std::max<size_t>(bwd_bytes, 256));
  for (auto* b : {&o, &dq, &dk, &dv}) b->poison();
  fwd_ws.poison(), bwd_ws.poison();
  day05::TrainingStepTensors t;
  t.q = in_q.data(), t.k = in_k.data(), t.v = in_v.data(), t.dout = in_do.data();
  t.o = o.data(), t.dq = dq.data(), t.dk = dk.data(), t.dv = dv.data();
  step.run(s, t, fwd_ws.data(), fwd_bytes, bwd_ws.data(), bwd_bytes, nullptr);
  CUDA_CHECK(cudaPeekAtLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> lse(static_cast<size_t>(s.rows()));
  CUDA_CHECK(
      cudaMemcpy(lse.data(), fwd_ws.data(), lse.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (auto* x : {&q, &k, &v, &dout}) *x = gpu100::round_trip<bf16>(*x);
  const auto fwd = day05::attention_cpu(s, q, k, v);
  const double tol = day05::tolerance(day05::Precision::kBf16);
  const auto co =
      day05::check_output(fwd.o, fwd.abs_o, gpu100::convert_to_float(o.download()), tol);
  const auto cl = day05::check_lse(fwd.lse, lse, tol);
  const auto ref = day05::attention_backward_cpu(s, q, k, v, dout);
  const double btol = day05::backward_tolerance(day05::Precision::kBf16);
  const auto cq =
      day05::check_output(ref.dq, ref.abs_dq, gpu100::convert_to_float(dq.download()), btol);
  const auto ck =
      day05::check_output(ref.dk, ref.abs_dk, gpu100::convert_to_float(dk.download()), btol);
  const auto cv =
      day05::check_output(ref.dv, ref.abs_dv, gpu100::convert_to_float(dv.download()), btol);
  INFO("O: " << co.summary());
  INFO("log-sum-exp: " << cl.summary());
  INFO("dQ: " << cq.summary());
  INFO("dK: " << ck.summary());
  INFO("dV: " << cv.summary());
  REQUIRE(co.ok);
  REQUIRE(cl.ok);
  REQUIRE(cq.ok);
  REQUIRE(ck.ok);
  REQUIRE(cv.ok);
}

// S = 777 is no multiple of any tile of the flash forwards or backwards; D = 128 causal is the
// bench line's case, D = 64 without the mask the other tiling.
std::vector<day05::AttentionShape> training_step_shapes() {
  std::vector<day05::AttentionShape> kept;
  for (const auto& sh : {shape(1, 2, 777, 128, true), shape(1, 2, 777, 64, false)}) {
    if (!gpu100::test_sizes({sh.elements()}).empty()) kept.push_back(sh);
  }
  return kept;
}
}  // namespace

TEST_CASE("the training step (own forward, then own backward) matches the CPU", "[gpu]") {
  // The own step's forward is a bf16 flash kernel (v4 needs sm_80 code, v5 sm_90a).
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm80, "the own training step");
  uint64_t seed = 1500;
  for (const auto& sh : training_step_shapes()) {
    check_training_step(day05::own_training_step(sh), sh, seed += 5);
  }
}

TEST_CASE("the library's training step (cuDNN forward, then cuDNN backward) matches the CPU",
          "[gpu]") {
  GPU100_REQUIRE_BUILD(gpu100::ArchNeed::kSm80, "cuDNN's training step");
  if (!day05::have_cudnn_sdpa()) {
    GPU100_SKIP(
        "built without the cuDNN frontend (scripts/setup.sh fetches it where the network allows)");
  }
  if (gpu100::sanitizer_run()) GPU100_SKIP("cuDNN's kernels are not ours to sanitize");
  uint64_t seed = 1600;
  for (const auto& sh : training_step_shapes()) {
    check_training_step(day05::library_training_step(), sh, seed += 5);
  }
}

TEST_CASE("backward variants this build lacks for this GPU are reported as skipped", "[gpu]") {
  GPU100_REQUIRE_GPU();
  GPU100_SKIP_LACKED(day05::attention_backward_variants());
}
