// day05 CPU tests of the backward pass's reference: the gradients against central finite
// differences of an independent double-precision forward, hand-worked cases, the identities the
// math gives (the rows of dS sum to zero; a causal key hears only the rows after it) and the FLOP
// convention; and of the GPU side what needs no GPU: the backward registry, bwd v1's chunks,
// workspace and budget, and every launcher refusing bad arguments before any CUDA call.
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "attention.hpp"
#include "attention_backward.hpp"
#include "common/catch.hpp"
#include "common/device_info.hpp"
#include "common/random.hpp"
#include "common/tags.hpp"

using Catch::Approx;

namespace {

// The loss L = sum of dO o O, with O computed here in double by the textbook formula, written
// apart from the reference so that a mistake in one is not repeated in the other. dL/dX is then
// exactly what attention_backward_cpu returns for X = Q, K, V.
double loss(const day05::AttentionShape& s, const std::vector<double>& q,
            const std::vector<double>& k, const std::vector<double>& v,
            const std::vector<float>& dout) {
  const int n = s.s, d = s.d;
  const double c = 1.0 / std::sqrt(double(d));
  double total = 0;
  for (int64_t bh = 0; bh < s.heads(); ++bh) {
    const size_t base = size_t(bh) * n * d;
    for (int i = 0; i < n; ++i) {
      const int keys = s.causal ? i + 1 : n;
      std::vector<double> w(static_cast<size_t>(keys));
      double z = 0;
      for (int j = 0; j < keys; ++j) {
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += q[base + i * d + e] * k[base + j * d + e];
        w[j] = std::exp(c * dot);  // small inputs: no overflow without the max
        z += w[j];
      }
      for (int e = 0; e < d; ++e) {
        double o = 0;
        for (int j = 0; j < keys; ++j) o += w[j] / z * v[base + j * d + e];
        total += double(dout[base + i * d + e]) * o;
      }
    }
  }
  return total;
}

// Every element of Q, K and V: the reference's gradient against (L(x + h) - L(x - h)) / 2h.
void check_against_finite_differences(const day05::AttentionShape& s, uint64_t seed) {
  const size_t n = static_cast<size_t>(s.elements());
  const auto q = gpu100::random_vector<float>(n, seed);
  const auto k = gpu100::random_vector<float>(n, seed + 1);
  const auto v = gpu100::random_vector<float>(n, seed + 2);
  const auto dout = gpu100::random_vector<float>(n, seed + 3);
  const auto r = day05::attention_backward_cpu(s, q, k, v, dout);
  std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end());
  const double h = 1e-5;
  int checked = 0;
  for (int which = 0; which < 3; ++which) {
    std::vector<double>& x = which == 0 ? qd : which == 1 ? kd : vd;
    const std::vector<double>& grad = which == 0 ? r.dq : which == 1 ? r.dk : r.dv;
    for (size_t e = 0; e < n; ++e) {
      const double keep = x[e];
      x[e] = keep + h;
      const double up = loss(s, qd, kd, vd, dout);
      x[e] = keep - h;
      const double down = loss(s, qd, kd, vd, dout);
      x[e] = keep;
      const double fd = (up - down) / (2 * h);
      // Central differences err by O(h^2) plus the loss's rounding over h: about 1e-9 here.
      INFO("tensor "
           << "QKV"[which] << ", element " << e);
      CHECK(grad[e] == Approx(fd).margin(1e-7).epsilon(1e-6));
      ++checked;
    }
  }
  CHECK(checked == int(3 * n));
}
// A launcher's refusal: `call` throws std::invalid_argument with one line containing `want`.
template <class F>
bool refused(F&& call, const char* want) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    INFO(what);
    return what.find(want) != std::string::npos && what.find('\n') == std::string::npos;
  } catch (...) {
    return false;
  }
  return false;
}

// Host memory standing in for a backward's tensors (all eight at one 16-byte aligned address):
// for calls that must be refused before they touch any of it.
struct HostTensors {
  alignas(16) float buf[4096];
  __nv_bfloat16* p = reinterpret_cast<__nv_bfloat16*>(buf);
  day05::BackwardTensors<__nv_bfloat16> tensors() {
    day05::BackwardTensors<__nv_bfloat16> t;
    t.q = t.k = t.v = t.o = t.dout = t.dq = t.dk = t.dv = p;
    t.lse = buf;
    return t;
  }
};

// The argument checks a flash backward's launcher makes before any CUDA call, at a 4-row head with
// host memory standing in for the tensors: a short workspace, a null one, a D it has no tiling for
// (D = 40) and a tensor 2 bytes off 16-byte alignment (dQ, then dK) are each refused in one line.
template <class Launcher>
void check_flash_launcher_refusals(Launcher launch,
                                   size_t (*workspace_bytes)(const day05::AttentionShape&)) {
  HostTensors h;
  const day05::BackwardTensors<__nv_bfloat16> t = h.tensors();
  const day05::AttentionShape sh{1, 1, 4, 64};
  const size_t need = workspace_bytes(sh);
  REQUIRE(need > 0);
  REQUIRE(need <= sizeof h.buf);
  CHECK(refused([&] { launch(sh, t, h.buf, need - 1, nullptr); }, "a workspace of"));
  CHECK(refused([&] { launch(sh, t, nullptr, need, nullptr); }, "null"));
  CHECK(refused(
      [&] {
        launch(day05::AttentionShape{1, 1, 4, 40}, t, h.buf, need, nullptr);
      },
      "D must be 64 or 128"));
  for (int which = 0; which < 2; ++which) {
    auto misaligned = t;
    (which == 0 ? misaligned.dq : misaligned.dk) = h.p + 1;  // 2 bytes off
    INFO((which == 0 ? "dQ" : "dK") << " misaligned");
    CHECK(refused([&] { launch(sh, misaligned, h.buf, need, nullptr); }, "16-byte aligned"));
  }
}

}  // namespace

TEST_CASE("backward reference: dQ, dK and dV match finite differences of the loss", "[cpu]") {
  SECTION("one head, S = 5, D = 4") {
    check_against_finite_differences(day05::AttentionShape{1, 1, 5, 4}, 11);
  }
  SECTION("causal") {
    check_against_finite_differences(day05::AttentionShape{1, 1, 5, 4, true}, 12);
  }
  SECTION("two batches, two heads, odd S = 7, D = 6, causal") {
    check_against_finite_differences(day05::AttentionShape{2, 2, 7, 6, true}, 13);
  }
  SECTION("S = 1") {
    check_against_finite_differences(day05::AttentionShape{1, 2, 1, 8}, 14);
  }
}

TEST_CASE("backward reference: hand-worked cases", "[cpu]") {
  SECTION("S = 1: P = 1, so dV = dO and dQ = dK = 0") {
    const auto s = day05::AttentionShape{1, 1, 1, 4};
    const std::vector<float> q = {0.5f, -1, 2, 0.25f}, k = {1, 1, -1, 0.5f}, v = {3, -2, 1, 4};
    const std::vector<float> dout = {0.1f, 0.2f, -0.3f, 0.4f};
    const auto r = day05::attention_backward_cpu(s, q, k, v, dout);
    for (int e = 0; e < 4; ++e) {
      CHECK(r.dv[e] == Approx(dout[e]));
      CHECK(r.dq[e] == Approx(0).margin(1e-15));
      CHECK(r.dk[e] == Approx(0).margin(1e-15));
      CHECK(r.o[e] == Approx(v[e]));
    }
    // D = dO . O = 0.3 - 0.4 - 0.3 + 1.6.
    CHECK(r.delta[0] == Approx(1.2));
  }
  SECTION("Q = 0: uniform attention, dV_j = the mean of dO over the rows") {
    const auto s = day05::AttentionShape{1, 1, 3, 2};
    const std::vector<float> q(6, 0.0f), k = {1, 2, 3, 4, 5, 6}, v = {1, 0, 0, 1, 1, 1};
    const std::vector<float> dout = {1, 2, 3, 4, 5, 6};
    const auto r = day05::attention_backward_cpu(s, q, k, v, dout);
    for (int j = 0; j < 3; ++j) {
      CHECK(r.dv[j * 2 + 0] == Approx(3.0));  // (1 + 3 + 5) / 3
      CHECK(r.dv[j * 2 + 1] == Approx(4.0));  // (2 + 4 + 6) / 3
    }
    // O = the mean of V's rows = (2/3, 2/3) in every row; lse = log 3.
    CHECK(r.o[0] == Approx(2.0 / 3));
    CHECK(r.lse[2] == Approx(std::log(3.0)));
  }
}

TEST_CASE("backward reference: the identities of the math", "[cpu]") {
  const auto s = day05::AttentionShape{2, 3, 37, 16};
  const size_t n = static_cast<size_t>(s.elements());
  const auto q = gpu100::random_vector<float>(n, 21);
  const auto k = gpu100::random_vector<float>(n, 22);
  const auto v = gpu100::random_vector<float>(n, 23);
  auto dout = gpu100::random_vector<float>(n, 24);
  for (bool causal : {false, true}) {
    auto sc = s;
    sc.causal = causal;
    const auto r = day05::attention_backward_cpu(sc, q, k, v, dout);
    // O and the log-sum-exp are the forward reference's.
    const auto fwd = day05::attention_cpu(sc, q, k, v);
    for (size_t e = 0; e < n; ++e) REQUIRE(r.o[e] == Approx(fwd.o[e]).margin(1e-13));
    for (size_t i = 0; i < r.lse.size(); ++i) REQUIRE(r.lse[i] == Approx(fwd.lse[i]));
    for (int64_t bh = 0; bh < sc.heads(); ++bh) {
      const size_t base = size_t(bh) * sc.s * sc.d;
      for (int e = 0; e < sc.d; ++e) {
        // Each row of dS sums to zero (softmax's outputs sum to one), so the keys' gradients do:
        // sum_j dK_j = c sum_i (sum_j dS_ij) Q_i = 0.
        double sum = 0, scale = 0;
        for (int j = 0; j < sc.s; ++j) {
          sum += r.dk[base + j * sc.d + e];
          scale += r.abs_dk[base + j * sc.d + e];
        }
        CHECK(std::fabs(sum) <= 1e-12 * scale);
      }
      // D_i = dO_i . O_i.
      for (int i = 0; i < sc.s; ++i) {
        double dot = 0;
        for (int e = 0; e < sc.d; ++e) {
          dot += double(dout[base + i * sc.d + e]) * r.o[base + i * sc.d + e];
        }
        CHECK(r.delta[bh * sc.s + i] == Approx(dot).margin(1e-13));
      }
    }
    // The scales bound the gradients: |dX| <= abs_dX.
    for (size_t e = 0; e < n; ++e) {
      REQUIRE(std::fabs(r.dq[e]) <= r.abs_dq[e] * (1 + 1e-12));
      REQUIRE(std::fabs(r.dk[e]) <= r.abs_dk[e] * (1 + 1e-12));
      REQUIRE(std::fabs(r.dv[e]) <= r.abs_dv[e] * (1 + 1e-12));
    }
  }
  SECTION("causal: the last key hears only the last query row") {
    auto sc = s;
    sc.causal = true;
    const auto before = day05::attention_backward_cpu(sc, q, k, v, dout);
    auto changed = dout;
    for (int64_t bh = 0; bh < sc.heads(); ++bh) {
      for (int i = 0; i + 1 < sc.s; ++i) {
        for (int e = 0; e < sc.d; ++e) changed[(size_t(bh) * sc.s + i) * sc.d + e] *= -3.0f;
      }
    }
    const auto after = day05::attention_backward_cpu(sc, q, k, v, changed);
    for (int64_t bh = 0; bh < sc.heads(); ++bh) {
      const size_t last = (size_t(bh) * sc.s + sc.s - 1) * sc.d;
      for (int e = 0; e < sc.d; ++e) {
        CHECK(after.dk[last + e] == before.dk[last + e]);
        CHECK(after.dv[last + e] == before.dv[last + e]);
      }
      // ...while the first key hears every row, so its dV moved.
      CHECK(after.dv[size_t(bh) * sc.s * sc.d] != before.dv[size_t(bh) * sc.s * sc.d]);
    }
  }
}

TEST_CASE("backward FLOPs: five GEMMs, 2.5x the forward's two", "[cpu]") {
  const auto s = day05::AttentionShape{8, 16, 2048, 128};
  CHECK(day05::attention_backward_flops(s) == 10.0 * 8 * 16 * 2048.0 * 2048.0 * 128);
  CHECK(day05::attention_backward_flops(s) == 2.5 * day05::attention_flops(s));
  const auto c = day05::AttentionShape{8, 16, 2048, 128, true};
  CHECK(day05::attention_backward_flops(c) == 0.5 * day05::attention_backward_flops(s));
}

TEST_CASE("training-step FLOPs: the forward's 4 and the backward's 10, 14 B H S^2 D", "[cpu]") {
  const auto s = day05::AttentionShape{8, 16, 2048, 128};
  CHECK(day05::attention_training_step_flops(s) == 14.0 * 8 * 16 * 2048.0 * 2048.0 * 128);
  const auto c = day05::AttentionShape{8, 16, 2048, 128, true};
  CHECK(day05::attention_training_step_flops(c) == 7.0 * 8 * 16 * 2048.0 * 2048.0 * 128);
}

TEST_CASE("training step: the build's fastest own pair, and the library's", "[cpu]") {
  // The library's: the bf16 library rows of the two registries.
  const auto lib = day05::library_training_step();
  REQUIRE(lib.forward != nullptr);
  REQUIRE(lib.backward != nullptr);
  CHECK(std::string(lib.forward->name) == "cudnn_sdpa");
  CHECK(std::string(lib.backward->name) == "cudnn_sdpa_bwd");
  CHECK(lib.name() == "cudnn_sdpa+cudnn_sdpa_bwd");
  // The own: best_flash_bf16()'s forward, and the ladder's last bf16 rung the build runs that
  // takes the shape, bwd v2c passed over (tagged "not_in_step"): bwd v3 with sm_90a code, else
  // bwd v2d with sm_90 code, else bwd v2b with sm_80 code.
  for (int d : {64, 128}) {
    const auto s = day05::AttentionShape{1, 2, 777, d, true};
    const auto own = day05::own_training_step(s);
    INFO("D = " << d);
    REQUIRE(own.forward == day05::find_variant(day05::best_flash_bf16()));
    if (!gpu100::build_has(gpu100::ArchNeed::kSm80)) {
      CHECK(!own.refusal(s).empty());  // no bf16 flash forward in this build
      continue;
    }
    REQUIRE(own.backward != nullptr);
    CHECK(own.refusal(s).empty());
    std::string want = "bwd_v2b_flash_mma_dq_pass";
    if (gpu100::build_has(gpu100::ArchNeed::kSm90a)) {
      want = "bwd_v3_flash_wgmma";
    } else if (gpu100::build_has(gpu100::ArchNeed::kSm90) && day05::bwd_v2d_refusal(s).empty()) {
      want = "bwd_v2d_flash_mma_vector_red";
    }
    CHECK(std::string(own.backward->name) == want);
    CHECK(own.name() == std::string(own.forward->name) + "+" + want);
  }
  // D = 40: no flash forward takes it (v4 and v5: D = 64 and 128), so the own step is refused
  // with the forward's one-line reason; bwd v1 is the only rung that takes D = 40.
  const auto s40 = day05::AttentionShape{1, 2, 77, 40, false};
  const auto own40 = day05::own_training_step(s40);
  const std::string why = own40.refusal(s40);
  CHECK(!why.empty());
  CHECK(why.find('\n') == std::string::npos);
  if (gpu100::build_has(gpu100::ArchNeed::kSm80)) {
    REQUIRE(own40.backward != nullptr);
    CHECK(std::string(own40.backward->name) == "bwd_v1_cublas");
  }
}

TEST_CASE("training step: null tensors and workspaces are refused before any CUDA call", "[cpu]") {
  const auto s = day05::AttentionShape{1, 1, 4, 64};
  float dummy[64];
  auto* p = reinterpret_cast<__nv_bfloat16*>(dummy);
  for (const auto& step : {day05::own_training_step(s), day05::library_training_step()}) {
    INFO(step.name());
    for (int which = 0; which < 9; ++which) {
      INFO("null " << which);
      day05::TrainingStepTensors t;
      t.q = t.k = t.v = t.dout = p;
      t.o = t.dq = t.dk = t.dv = p;
      void* fwd_ws = dummy;
      const __nv_bfloat16** in[] = {&t.q, &t.k, &t.v, &t.dout};
      __nv_bfloat16** out[] = {&t.o, &t.dq, &t.dk, &t.dv};
      if (which < 4) {
        *in[which] = nullptr;
      } else if (which < 8) {
        *out[which - 4] = nullptr;
      } else {
        fwd_ws = nullptr;
      }
      CHECK_THROWS_AS(step.run(s, t, fwd_ws, sizeof dummy, dummy, sizeof dummy, nullptr),
                      std::invalid_argument);
    }
    day05::TrainingStepTensors t;
    t.q = t.k = t.v = t.dout = p;
    t.o = t.dq = t.dk = t.dv = p;
    CHECK_THROWS_AS(step.run(day05::AttentionShape{1, 1, 0, 64}, t, dummy, sizeof dummy, dummy,
                             sizeof dummy, nullptr),
                    std::invalid_argument);  // S = 0
  }
}

TEST_CASE("backward reference: tensors of the wrong size and bad shapes are refused", "[cpu]") {
  const std::vector<float> four(4, 0.5f), three(3, 0.5f);
  CHECK_THROWS_AS(
      day05::attention_backward_cpu(day05::AttentionShape{1, 1, 2, 2}, four, four, four, three),
      std::invalid_argument);
  CHECK_THROWS_AS(
      day05::attention_backward_cpu(day05::AttentionShape{1, 1, 0, 2}, four, four, four, four),
      std::invalid_argument);
  CHECK_THROWS_AS(
      day05::attention_backward_cpu(day05::AttentionShape{1, 1, 1, 3}, three, three, three, three),
      std::invalid_argument);  // D odd
}

TEST_CASE("backward reference: one head writes every value of its own head, and nothing else",
          "[cpu]") {
  const auto s = day05::AttentionShape{2, 2, 13, 6, true};
  const size_t n = static_cast<size_t>(s.elements());
  const auto q = gpu100::random_vector<float>(n, 31);
  const auto k = gpu100::random_vector<float>(n, 32);
  const auto v = gpu100::random_vector<float>(n, 33);
  const auto dout = gpu100::random_vector<float>(n, 34);
  const auto all = day05::attention_backward_cpu(s, q, k, v, dout);
  // Every output poisoned with NaN, then head 2 alone computed.
  const double nan = std::nan("");
  day05::BackwardReference r;
  for (auto* t : {&r.dq, &r.dk, &r.dv, &r.abs_dq, &r.abs_dk, &r.abs_dv, &r.o}) t->assign(n, nan);
  r.lse.assign(static_cast<size_t>(s.rows()), nan);
  r.delta.assign(static_cast<size_t>(s.rows()), nan);
  const int64_t head = 2;
  day05::attention_backward_head_cpu(s, q.data(), k.data(), v.data(), dout.data(), head, r);
  const size_t per_head = size_t(s.s) * s.d;
  for (size_t e = 0; e < n; ++e) {
    const bool mine = e / per_head == size_t(head);
    const std::vector<double>* got[] = {&r.dq, &r.dk, &r.dv, &r.abs_dq, &r.abs_dk, &r.abs_dv, &r.o};
    const std::vector<double>* want[] = {&all.dq,     &all.dk,     &all.dv, &all.abs_dq,
                                         &all.abs_dk, &all.abs_dv, &all.o};
    for (int t = 0; t < 7; ++t) {
      if (mine) {
        REQUIRE((*got[t])[e] == (*want[t])[e]);  // the same arithmetic: bit for bit
      } else {
        REQUIRE(std::isnan((*got[t])[e]));
      }
    }
  }
  for (int i = 0; i < s.s; ++i) {
    CHECK(r.lse[head * s.s + i] == all.lse[head * s.s + i]);
    CHECK(r.delta[head * s.s + i] == all.delta[head * s.s + i]);
    CHECK(std::isnan(r.lse[i]));
  }
}

TEST_CASE(
    "the backward registry lists bwd v1 in both precisions, bwd v2, v2b, v2c, v2d, v3 and cuDNN's "
    "backward",
    "[cpu]") {
  const auto& vs = day05::attention_backward_variants();
  REQUIRE(vs.size() >= 3);
  CHECK(std::strcmp(vs[0].name, "bwd_v1_cublas_fp32") == 0);
  CHECK(vs[0].precision == day05::Precision::kFp32);
  CHECK(vs[0].fp32 == day05::attention_bwd_v1_cublas_fp32);
  CHECK(vs[0].is_library);  // the fp32 rows' library path, as v2_cublas is the forward's
  CHECK(vs[0].needs == gpu100::ArchNeed::kAny);
  CHECK(std::strcmp(vs[1].name, "bwd_v1_cublas") == 0);
  CHECK(vs[1].precision == day05::Precision::kBf16);
  CHECK(vs[1].bf16 == day05::attention_bwd_v1_cublas);
  CHECK_FALSE(vs[1].is_library);
  CHECK(vs[1].needs == gpu100::ArchNeed::kSm80);  // cuBLAS's bf16 GEMMs
  REQUIRE(vs.size() >= 4);
  CHECK(std::strcmp(vs[2].name, "bwd_v2_flash_mma") == 0);  // the ladder's next rung
  CHECK(vs[2].precision == day05::Precision::kBf16);
  CHECK(vs[2].bf16 == day05::attention_bwd_v2_flash_mma);
  CHECK_FALSE(vs[2].is_library);
  CHECK(vs[2].needs == gpu100::ArchNeed::kSm80);  // mma.sync bf16, cp.async
  REQUIRE(vs.size() >= 8);
  CHECK(std::strcmp(vs[3].name, "bwd_v2b_flash_mma_dq_pass") == 0);  // v2 with the dQ pass
  CHECK(vs[3].precision == day05::Precision::kBf16);
  CHECK(vs[3].bf16 == day05::attention_bwd_v2b_flash_mma_dq_pass);
  CHECK_FALSE(vs[3].is_library);
  CHECK(vs[3].needs == gpu100::ArchNeed::kSm80);
  CHECK(std::strcmp(vs[4].name, "bwd_v2c_flash_mma_128_keys") == 0);  // v2, 128 keys a block
  CHECK(vs[4].bf16 == day05::attention_bwd_v2c_flash_mma_128_keys);
  CHECK(vs[4].workspace_bytes == day05::bwd_v2_workspace_bytes);  // v2's accumulator and D_i
  CHECK(vs[4].needs == gpu100::ArchNeed::kSm80);
  CHECK(std::strcmp(vs[5].name, "bwd_v2d_flash_mma_vector_red") == 0);  // v2c, vector reductions
  CHECK(vs[5].bf16 == day05::attention_bwd_v2d_flash_mma_vector_red);
  CHECK(vs[5].workspace_bytes == day05::bwd_v2_workspace_bytes);
  CHECK(vs[5].needs == gpu100::ArchNeed::kSm90);  // red.global.add.v2.f32
  for (int i : {4, 5}) {
    CHECK(vs[i].precision == day05::Precision::kBf16);
    CHECK_FALSE(vs[i].is_library);
  }
  CHECK(gpu100::has_tag(vs[4].tags, "not_in_step"));  // v2c: no faster than v2b (README)
  CHECK_FALSE(gpu100::has_tag(vs[5].tags, "not_in_step"));
  CHECK(std::strcmp(vs[6].name, "bwd_v3_flash_wgmma") == 0);  // Hopper's rung, then the library
  CHECK(vs[6].precision == day05::Precision::kBf16);
  CHECK(vs[6].bf16 == day05::attention_bwd_v3_flash_wgmma);
  CHECK_FALSE(vs[6].is_library);
  CHECK(vs[6].needs == gpu100::ArchNeed::kSm90a);  // wgmma, TMA, setmaxnreg
  const day05::AttentionBackwardVariant* cudnn = day05::find_backward_variant("cudnn_sdpa_bwd");
  REQUIRE(cudnn != nullptr);
  CHECK(cudnn == &vs.back());  // the library row comes last, after the ladder's rungs
  CHECK(cudnn->is_library);
  CHECK(cudnn->precision == day05::Precision::kBf16);
  CHECK(cudnn->bf16 == day05::attention_cudnn_sdpa_backward);
  for (const auto& v : vs) {
    INFO(v.name);
    CHECK((v.fp32 != nullptr) == (v.precision == day05::Precision::kFp32));
    CHECK((v.bf16 != nullptr) == (v.precision == day05::Precision::kBf16));
    CHECK(day05::find_backward_variant(v.name) == &v);
    CHECK(day05::find_variant(v.name) == nullptr);  // no name in both registries
  }
  CHECK(day05::find_backward_variant("v1_naive") == nullptr);
  if (!day05::have_cudnn_sdpa()) {
    CHECK_FALSE(day05::cudnn_sdpa_backward_refusal(day05::AttentionShape{1, 1, 8, 64}).empty());
  }
  CHECK(day05::backward_tolerance(day05::Precision::kFp32) == day05::kBwdFp32Tol);
  CHECK(day05::backward_tolerance(day05::Precision::kBf16) == day05::kBwdBf16Tol);
}

TEST_CASE("bwd v1: head chunks, workspace and the S x S budget", "[cpu]") {
  using day05::AttentionShape;
  // Per head: S^2 fp32 scores plus S^2 P in bf16 (6 bytes per score) or fp32 (8 bytes).
  CHECK(day05::bwd_v1_heads_per_chunk(AttentionShape{8, 16, 2048, 64}, 2) == 128);
  CHECK(day05::bwd_v1_heads_per_chunk(AttentionShape{8, 16, 4096, 128}, 2) == 42);
  CHECK(day05::bwd_v1_heads_per_chunk(AttentionShape{8, 16, 4096, 128}, 4) == 32);
  CHECK(day05::bwd_v1_heads_per_chunk(AttentionShape{4, 16, 8192, 128}, 2) == 10);
  CHECK(day05::bwd_v1_heads_per_chunk(AttentionShape{4, 16, 8192, 128}, 4) == 8);
  // [D_i: B H S fp32][scores: chunk S^2 fp32][P: chunk S^2], each part on a 256-byte boundary.
  const AttentionShape small{1, 2, 64, 64};
  CHECK(day05::bwd_v1_workspace_bytes(small) == 512 + 2 * 64 * 64 * 4 + 2 * 64 * 64 * 2);
  CHECK(day05::bwd_v1_fp32_workspace_bytes(small) == 512 + 2 * 64 * 64 * 4 + 2 * 64 * 64 * 4);
  CHECK(day05::bwd_v1_workspace_bytes(AttentionShape{1, 1, 3, 2}) == 256 + 256 + 9 * 2);
  // Refused only when one head's buffers pass the 4 GiB budget: S > 26754 in bf16, > 23170 fp32.
  CHECK(day05::bwd_v1_refusal(AttentionShape{1, 1, 26754, 64}).empty());
  CHECK_FALSE(day05::bwd_v1_refusal(AttentionShape{1, 1, 26755, 64}).empty());
  CHECK(day05::bwd_v1_fp32_refusal(AttentionShape{1, 1, 23170, 64}).empty());
  CHECK_FALSE(day05::bwd_v1_fp32_refusal(AttentionShape{1, 1, 23171, 64}).empty());
  const std::string why = day05::bwd_v1_refusal(AttentionShape{1, 1, 32768, 64});
  CHECK(why.find("6.00 GiB") != std::string::npos);
  CHECK(why.find("budget of 4.00 GiB") != std::string::npos);
  CHECK(why.find('\n') == std::string::npos);
}

TEST_CASE(
    "bwd v2, v2b, v2c and v2d: workspace, the D they take, and their refusals before any "
    "launch",
    "[cpu]") {
  using day05::AttentionShape;
  // [dQ accumulator: B H S D fp32, on a 256-byte boundary][D_i: B H S fp32].
  CHECK(day05::bwd_v2_workspace_bytes(AttentionShape{1, 2, 64, 64}) ==
        2 * 64 * 64 * 4 + 2 * 64 * 4);
  CHECK(day05::bwd_v2_workspace_bytes(AttentionShape{1, 1, 3, 64}) == 768 + 3 * 4);
  CHECK(day05::bwd_v2_workspace_bytes(AttentionShape{8, 16, 4096, 128}) ==
        size_t(8) * 16 * 4096 * 128 * 4 + size_t(8) * 16 * 4096 * 4);
  // v2b: D_i only, B H S fp32.
  CHECK(day05::bwd_v2b_workspace_bytes(AttentionShape{1, 2, 77, 64}) == 2 * 77 * 4);
  CHECK(day05::bwd_v2b_refusal(AttentionShape{1, 1, 77, 128}).empty());
  CHECK(day05::bwd_v2b_refusal(AttentionShape{1, 1, 77, 40})
            .find("bwd_v2b_flash_mma_dq_pass: D must be 64 or 128") == 0);
  CHECK(day05::bwd_v2_refusal(AttentionShape{1, 1, 77, 64}).empty());
  CHECK(day05::bwd_v2_refusal(AttentionShape{1, 1, 1, 128, true}).empty());
  for (int d : {40, 32, 96, 256}) {
    const std::string why = day05::bwd_v2_refusal(AttentionShape{1, 1, 77, d});
    INFO("D = " << d);
    CHECK(why.find("bwd_v2_flash_mma: D must be 64 or 128") == 0);
    CHECK(why.find('\n') == std::string::npos);
  }
  // v2c and v2d (128 keys per block) take what v2 takes; D = 128 only where the GPU gives a block
  // the 120.5 KB its tiling takes (not on sm_86 / sm_89; never refused without a GPU to ask).
  for (auto refusal : {day05::bwd_v2c_refusal, day05::bwd_v2d_refusal}) {
    CHECK(refusal(AttentionShape{1, 1, 77, 64}).empty());
    CHECK(refusal(AttentionShape{1, 1, 1, 64, true}).empty());
    CHECK(refusal(AttentionShape{1, 1, 77, 40}).find(": D must be 64 or 128") != std::string::npos);
    const std::string why = refusal(AttentionShape{1, 1, 77, 128});
    const size_t have = gpu100::smem_per_block_optin();
    // K, V: 2 x 128 rows of 136 bf16; Q, dO: 2 x 64 rows; dS^T: 128 rows of 72; lse, D: 2 x 64.
    constexpr size_t kNeed = 2 * 128 * 136 * 2 + 2 * 64 * 136 * 2 + 128 * 72 * 2 + 2 * 64 * 4;
    CHECK(why.empty() == (have == 0 || have >= kNeed));
    CHECK(why.find('\n') == std::string::npos);
    if (!why.empty()) CHECK(why.find("shared memory per block") != std::string::npos);
  }
  // The launchers' argument checks, before any launch.
  check_flash_launcher_refusals(day05::attention_bwd_v2_flash_mma, day05::bwd_v2_workspace_bytes);
  check_flash_launcher_refusals(day05::attention_bwd_v2b_flash_mma_dq_pass,
                                day05::bwd_v2b_workspace_bytes);
  check_flash_launcher_refusals(day05::attention_bwd_v2c_flash_mma_128_keys,
                                day05::bwd_v2_workspace_bytes);
  check_flash_launcher_refusals(day05::attention_bwd_v2d_flash_mma_vector_red,
                                day05::bwd_v2_workspace_bytes);
}

TEST_CASE("bwd v3: workspace, the D it takes, and its refusals before any CUDA call", "[cpu]") {
  using day05::AttentionShape;
  // [dQ accumulator: B H S D fp32][D_i: B H S_pad fp32][lse log2 e: B H S_pad fp32], the first two
  // rounded up to 256 bytes, S_pad = S rounded up to 64.
  CHECK(day05::bwd_v3_workspace_bytes(AttentionShape{1, 2, 64, 64}) ==
        2 * 64 * 64 * 4 + 2 * 64 * 4 + 2 * 64 * 4);
  CHECK(day05::bwd_v3_workspace_bytes(AttentionShape{1, 1, 3, 64}) == 768 + 256 + 64 * 4);
  CHECK(day05::bwd_v3_workspace_bytes(AttentionShape{1, 3, 77, 128}) ==
        3 * 77 * 128 * 4 + 3 * 128 * 4 + 3 * 128 * 4);
  CHECK(day05::bwd_v3_workspace_bytes(AttentionShape{8, 16, 4096, 128}) ==
        size_t(8) * 16 * 4096 * 128 * 4 + 2 * size_t(8) * 16 * 4096 * 4);
  CHECK(day05::bwd_v3_refusal(AttentionShape{1, 1, 77, 64}).empty());
  CHECK(day05::bwd_v3_refusal(AttentionShape{1, 1, 1, 128, true}).empty());
  for (int d : {40, 32, 96, 256}) {
    const std::string why = day05::bwd_v3_refusal(AttentionShape{1, 1, 77, d});
    INFO("D = " << d);
    CHECK(why.find("bwd_v3_flash_wgmma: D must be 64 or 128") == 0);
    CHECK(why.find('\n') == std::string::npos);
  }
  // The launchers' argument checks come before the build check, so these hold in every build.
  check_flash_launcher_refusals(day05::attention_bwd_v3_flash_wgmma, day05::bwd_v3_workspace_bytes);
}

TEST_CASE("the backward launchers refuse bad arguments before any CUDA call", "[cpu]") {
  // Host memory stands in for the tensors: every call below must throw before touching it.
  float dummy[64];
  auto* p = reinterpret_cast<__nv_bfloat16*>(dummy);
  auto tensors = [&](auto* x) {
    day05::BackwardTensors<std::remove_pointer_t<decltype(x)>> t;
    t.q = t.k = t.v = t.o = t.dout = t.dq = t.dk = t.dv = x;
    t.lse = dummy;
    return t;
  };
  const day05::AttentionShape good{1, 1, 4, 8}, bad_s{1, 1, 0, 8}, bad_d{1, 1, 4, 7};
  auto refused = [](auto&& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      return !what.empty() && what.find('\n') == std::string::npos;  // one line
    } catch (...) {
      return false;
    }
    return false;
  };
  for (const auto& v : day05::attention_backward_variants()) {
    INFO(v.name);
    // One tensor null at a time, for each of the nine.
    for (int which = 0; which < 9; ++which) {
      INFO("null tensor " << which);
      if (v.fp32 != nullptr) {
        auto t = tensors(dummy);
        const float** in[] = {&t.q, &t.k, &t.v, &t.o, &t.dout, &t.lse};
        float** out[] = {&t.dq, &t.dk, &t.dv};
        if (which < 6)
          *in[which] = nullptr;
        else
          *out[which - 6] = nullptr;
        CHECK(refused([&] { v.fp32(good, t, dummy, sizeof dummy, nullptr); }));
      } else {
        auto t = tensors(p);
        const __nv_bfloat16** in[] = {&t.q, &t.k, &t.v, &t.o, &t.dout};
        __nv_bfloat16** out[] = {&t.dq, &t.dk, &t.dv};
        if (which < 5) {
          *in[which] = nullptr;
        } else if (which == 5) {
          t.lse = nullptr;
        } else {
          *out[which - 6] = nullptr;
        }
        CHECK(refused([&] { v.bf16(good, t, dummy, sizeof dummy, nullptr); }));
      }
    }
    // Bad shapes: S = 0, odd D.
    for (const auto& sh : {bad_s, bad_d}) {
      if (v.fp32 != nullptr) {
        CHECK(refused([&] { v.fp32(sh, tensors(dummy), dummy, sizeof dummy, nullptr); }));
      } else {
        CHECK(refused([&] { v.bf16(sh, tensors(p), dummy, sizeof dummy, nullptr); }));
      }
    }
  }
  // bwd v1: a workspace one byte short, or none; a shape over its budget.
  const size_t need32 = day05::bwd_v1_fp32_workspace_bytes(good);
  CHECK(refused([&] {
    day05::attention_bwd_v1_cublas_fp32(good, tensors(dummy), dummy, need32 - 1, nullptr);
  }));
  CHECK(refused([&] {
    day05::attention_bwd_v1_cublas_fp32(good, tensors(dummy), nullptr, need32, nullptr);
  }));
  const size_t need16 = day05::bwd_v1_workspace_bytes(good);
  CHECK(refused(
      [&] { day05::attention_bwd_v1_cublas(good, tensors(p), dummy, need16 - 1, nullptr); }));
  CHECK(refused([&] {
    day05::attention_bwd_v1_cublas(day05::AttentionShape{1, 1, 32768, 64}, tensors(p), dummy,
                                   size_t(1) << 40, nullptr);
  }));
}
