#pragma once
// day05_self_attention: the backward pass of scaled dot-product attention, its FLOP convention and
// its CPU reference in double.
//
// For one head, with c = 1 / sqrt(D), the forward is
//   S = c Q K^T (+ mask),   P = softmax(S) row by row,   O = P V.
// Given dO (the gradient of the loss with respect to O), the gradients are
//   dV = P^T dO                              [S_k x D]
//   dP = dO V^T                              [S_q x S_k]
//   D_i = sum_j P_ij dP_ij = dO_i . O_i      one number per query row
//   dS = P o (dP - D)                        (o: element-wise; D broadcast along the row)
//   dQ = c dS K,   dK = c dS^T Q.
// The softmax's Jacobian is diag(p) - p p^T, so dS_i = p_i o (dP_i - p_i . dP_i), and
// p_i . dP_i = sum_j p_ij (dO_i . V_j) = dO_i . O_i: the row term D_i needs only O and dO, never
// the whole row of P. A flash backward recomputes P tile by tile from Q, K and the forward's
// row log-sum-exp (P_ij = exp(S_ij - lse_i)), so it stores nothing of size S x S either.
// Masked keys (j > i when causal) have P_ij = 0 and so receive no gradient from row i.
#include <cstdint>
#include <vector>

#include "attention.hpp"

namespace day05 {

// FLOPs of the backward, counted as FlashAttention counts them: five GEMMs of 2 S^2 D per head
// (S = Q K^T recomputed, dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q), 10 B H S^2 D, i.e.
// 2.5x attention_flops(s); half of that when causal. The element-wise work is not counted.
double attention_backward_flops(const AttentionShape& s);

struct BackwardReference {
  std::vector<double> dq, dk, dv;  // [B, H, S, D]
  // Each gradient element's scale, the sum of the absolute values of the terms it adds up (as
  // abs_o is for O): an error is measured against tol x this, so a cancelling sum is not held to a
  // tighter bound than the rounding of its terms allows.
  //   abs_dv[j] = sum_i P_ij |dO_i|
  //   abs_dq[i] = c sum_j P_ij (|dP_ij| + |D_i|) |K_j|,  abs_dk[j] = c sum_i P_ij (|dP_ij| + |D_i|)
  //   |Q_i|
  std::vector<double> abs_dq, abs_dk, abs_dv;
  std::vector<double> o;      // [B, H, S, D]: the forward's output, recomputed in double
  std::vector<double> lse;    // [B, H, S]: the row log-sum-exp
  std::vector<double> delta;  // [B, H, S]: D_i = dO_i . O_i
};

// The gradients of one head (bh = b H + h), written into r's vectors at that head's offsets (they
// must already have the full sizes; attention_backward_cpu sizes them). It walks the query rows
// one at a time, keeping only one row of P, so it needs O(S D) memory at any S. Returns the FLOPs
// it did (12 D per unmasked (i, j) pair: the five products, and O recomputed).
double attention_backward_head_cpu(const AttentionShape& s, const float* q, const float* k,
                                   const float* v, const float* dout, int64_t bh,
                                   BackwardReference& r);
// Every head. Throws std::invalid_argument on a bad shape or tensors of the wrong size.
BackwardReference attention_backward_cpu(const AttentionShape& s, const std::vector<float>& q,
                                         const std::vector<float>& k, const std::vector<float>& v,
                                         const std::vector<float>& dout);

}  // namespace day05
