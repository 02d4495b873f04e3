// The CPU reference of attention's backward pass, in double (attention_backward.hpp has the math).
// It walks one query row at a time, as a flash backward walks one tile: the row's probabilities
// are recomputed from Q and K, and the row's contributions to dK and dV are added to the keys'
// rows as it goes, so no S x S matrix is ever held.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "attention_backward.hpp"

namespace day05 {

double attention_backward_flops(const AttentionShape& s) {
  return 2.5 * attention_flops(s);
}

double attention_backward_head_cpu(const AttentionShape& s, const float* q, const float* k,
                                   const float* v, const float* dout, int64_t bh,
                                   BackwardReference& r) {
  const int d = s.d, n = s.s;
  const size_t base = size_t(bh) * size_t(n) * size_t(d);
  const size_t row_base = size_t(bh) * size_t(n);
  const double c = 1.0 / std::sqrt(double(d));
  // This head's rows of dK, dV and their scales collect every query row's terms.
  std::fill_n(r.dk.begin() + base, size_t(n) * d, 0.0);
  std::fill_n(r.dv.begin() + base, size_t(n) * d, 0.0);
  std::fill_n(r.abs_dk.begin() + base, size_t(n) * d, 0.0);
  std::fill_n(r.abs_dv.begin() + base, size_t(n) * d, 0.0);
  std::vector<double> p(static_cast<size_t>(n)), dp(static_cast<size_t>(n)),
      dp_abs(static_cast<size_t>(n)), abs_oi(static_cast<size_t>(d));
  double flops = 0;
  for (int i = 0; i < n; ++i) {
    const int keys = s.causal ? i + 1 : n;
    const float* qi = q + base + size_t(i) * d;
    const float* doi = dout + base + size_t(i) * d;
    // P_i = softmax(c q_i K^T) over the unmasked keys.
    r.lse[row_base + i] = attention_probs_cpu(s, q, k, bh, i, p.data());
    // O_i = P_i V (and its scale sum_j P_ij |V_j|, the forward's abs_o), then D_i = dO_i . O_i
    // and its scale delta_abs = sum_e |dO_ie| abs_o_ie.
    double* oi = &r.o[base + size_t(i) * d];
    std::fill_n(oi, d, 0.0);
    std::fill(abs_oi.begin(), abs_oi.end(), 0.0);
    for (int j = 0; j < keys; ++j) {
      const float* vj = v + base + size_t(j) * d;
      for (int e = 0; e < d; ++e) {
        oi[e] += p[j] * double(vj[e]);
        abs_oi[e] += p[j] * std::fabs(double(vj[e]));
      }
    }
    double delta = 0, delta_abs = 0;
    for (int e = 0; e < d; ++e) {
      delta += double(doi[e]) * oi[e];
      delta_abs += std::fabs(double(doi[e])) * abs_oi[e];
    }
    r.delta[row_base + i] = delta;
    // dP_ij = dO_i . V_j, and its scale sum_e |dO_ie| |V_je|.
    for (int j = 0; j < keys; ++j) {
      const float* vj = v + base + size_t(j) * d;
      double dot = 0, dot_abs = 0;
      for (int e = 0; e < d; ++e) {
        dot += double(doi[e]) * double(vj[e]);
        dot_abs += std::fabs(double(doi[e]) * double(vj[e]));
      }
      dp[j] = dot;
      dp_abs[j] = dot_abs;
    }
    // dS_ij = P_ij (dP_ij - D_i); row i's terms of dQ_i, of every dK_j and of every dV_j.
    double* dqi = &r.dq[base + size_t(i) * d];
    double* abs_dqi = &r.abs_dq[base + size_t(i) * d];
    std::fill_n(dqi, d, 0.0);
    std::fill_n(abs_dqi, d, 0.0);
    for (int j = 0; j < keys; ++j) {
      const double ds = c * p[j] * (dp[j] - delta);
      const double ds_abs = c * p[j] * (dp_abs[j] + delta_abs);
      const float* kj = k + base + size_t(j) * d;
      double* dkj = &r.dk[base + size_t(j) * d];
      double* dvj = &r.dv[base + size_t(j) * d];
      double* abs_dkj = &r.abs_dk[base + size_t(j) * d];
      double* abs_dvj = &r.abs_dv[base + size_t(j) * d];
      for (int e = 0; e < d; ++e) {
        dqi[e] += ds * double(kj[e]);
        abs_dqi[e] += ds_abs * std::fabs(double(kj[e]));
        dkj[e] += ds * double(qi[e]);
        abs_dkj[e] += ds_abs * std::fabs(double(qi[e]));
        dvj[e] += p[j] * double(doi[e]);
        abs_dvj[e] += p[j] * std::fabs(double(doi[e]));
      }
    }
    flops += 12.0 * double(d) * double(keys);
  }
  return flops;
}

BackwardReference attention_backward_cpu(const AttentionShape& s, const std::vector<float>& q,
                                         const std::vector<float>& k, const std::vector<float>& v,
                                         const std::vector<float>& dout) {
  check_shape(s);
  const size_t n = static_cast<size_t>(s.elements());
  if (q.size() != n || k.size() != n || v.size() != n || dout.size() != n) {
    throw std::invalid_argument(
        "attention_backward_cpu: Q, K, V and dO must have B H S D elements");
  }
  BackwardReference r;
  for (auto* t : {&r.dq, &r.dk, &r.dv, &r.abs_dq, &r.abs_dk, &r.abs_dv, &r.o}) t->resize(n);
  r.lse.resize(static_cast<size_t>(s.rows()));
  r.delta.resize(static_cast<size_t>(s.rows()));
  for (int64_t bh = 0; bh < s.heads(); ++bh) {
    attention_backward_head_cpu(s, q.data(), k.data(), v.data(), dout.data(), bh, r);
  }
  return r;
}

}  // namespace day05
