// day03_vector_add_variants' driver, the fusion parts: y = silu(a + b * c) as one kernel against
// the chains of three and four kernels an eager framework runs, and one diffusion denoising step
// (fp32, fp16, bf16) as one kernel against its chain of seven. The compulsory bytes are the same
// for a fused kernel and its chains; the chains move more, and their byte count bounds what fusion
// can gain.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "common/device_buffer.hpp"
#include "common/random.hpp"
#include "driver.hpp"

namespace day03 {

using gpu100::ResultRow;

void run_silu(int64_t n, const Options& opt, gpu100::DayRun& run) {
  const std::vector<float> a = gpu100::random_vector<float>(n, opt.common.seed + 20);
  const std::vector<float> b = gpu100::random_vector<float>(n, opt.common.seed + 21);
  const std::vector<float> c = gpu100::random_vector<float>(n, opt.common.seed + 22);
  std::vector<float> ref(n);
  const double cpu_ms =
      time_cpu_ms(n, [&] { silu_fused_cpu(a.data(), b.data(), c.data(), ref.data(), n); });
  // Compulsory bytes of y = silu(a + b * c): three arrays read, one written, whatever the chain.
  const double compulsory = 16.0 * double(n);
  run.table().add(
      gpu100::reference_row("cpu_silu", "fp32", gpu100::size_label(n), cpu_ms, compulsory));

  gpu100::DeviceBuffer<float> d_a(n), d_b(n), d_c(n), d_y(n), d_t(n), d_u(n);
  d_a.upload(a);
  d_b.upload(b);
  d_c.upload(c);
  double fused_ms = 0;
  for (const SiluVariant& v : silu_variants()) {
    ResultRow row = run.measure(
        v.name, "fp32", gpu100::size_label(n),
        [&] {
          d_y.poison();
          d_t.poison();
          d_u.poison();
        },
        [&] {
          v.launch(d_a.data(), d_b.data(), d_c.data(), d_y.data(), d_t.data(), d_u.data(), n,
                   nullptr);
        },
        [&] { return gpu100::compare(ref, d_y.download(), kSiluAbsTol, kSiluRelTol); });
    gpu100::derive(row, compulsory, 0, run.ceiling_gbps(), cpu_ms, 0);
    if (v.kernels == 1) {
      fused_ms = *row.ms;
    } else if (fused_ms > 0 && row.ok) {
      row.note = fmt::format(
          "{} kernels move {} arrays against the fused kernel's 4: silu_fused is {:.2f}x faster "
          "(byte bound {:.2f}x)",
          v.kernels, v.arrays_moved, *row.ms / fused_ms, v.arrays_moved / 4.0);
    }
    run.table().add(row);
  }
}

namespace {

template <typename T>
void run_diffusion_type(int64_t n, const Options& opt, gpu100::DayRun& run) {
  const char* precision = precision_name<T>();
  const std::string shape = gpu100::size_label(n);
  const std::vector<T> x_t = random_input<T>(n, opt.common.seed + 30);
  const std::vector<T> eps = random_input<T>(n, opt.common.seed + 31);
  const std::vector<T> prev = random_input<T>(n, opt.common.seed + 32);
  std::vector<T> ref(n);
  const double cpu_ms = time_cpu_ms(
      n, [&] { diffusion_cpu(x_t.data(), eps.data(), prev.data(), ref.data(), n, opt.step); });
  // Compulsory bytes: x_t, eps and prev read once, out written once, whatever the variant.
  const double compulsory = 4.0 * double(n) * sizeof(T);
  run.table().add(gpu100::reference_row("cpu_diffusion", precision, shape, cpu_ms, compulsory));

  gpu100::DeviceBuffer<T> d_x(n), d_e(n), d_p(n), d_out(n), d_t(n), d_u(n);
  d_x.upload(x_t);
  d_e.upload(eps);
  d_p.upload(prev);
  const auto& variants = diffusion_variants<T>();
  std::vector<ResultRow> rows;
  for (const DiffusionVariant<T>& v : variants) {
    rows.push_back(run.measure(
        v.name, precision, shape,
        [&] {
          d_out.poison();
          d_t.poison();
          d_u.poison();
        },
        [&] {
          v.launch(d_x.data(), d_e.data(), d_p.data(), d_out.data(), d_t.data(), d_u.data(), n,
                   opt.step, nullptr);
        },
        [&] {
          return check_diffusion(x_t, eps, prev, ref, d_out.download(), opt.step, v.roundings);
        }));
    gpu100::derive(rows.back(), compulsory, 0, run.ceiling_gbps(), cpu_ms, 0);
  }
  // Each chain's measured ratio to the fused kernel (the registry's one-kernel entry), beside the
  // ratio of the bytes they move, its bound at a bandwidth-bound size (the chain's launches can
  // add a few percent more: SiLU measured 2.06x against a bound of 2.00x).
  const DiffusionVariant<T>* fused = nullptr;
  const ResultRow* fused_row = nullptr;
  for (size_t i = 0; i < variants.size(); ++i) {
    if (variants[i].kernels == 1) {
      fused = &variants[i];
      fused_row = &rows[i];
    }
  }
  for (size_t i = 0; i < variants.size(); ++i) {
    ResultRow& row = rows[i];
    if (fused != nullptr && variants[i].kernels > 1 && fused_row->ok && row.ok && fused_row->ms &&
        row.ms) {
      row.note = fmt::format(
          "{} kernels move {} arrays against the fused kernel's {}: {} is {:.2f}x faster "
          "(byte bound {:.2f}x)",
          variants[i].kernels, variants[i].arrays_moved, fused->arrays_moved, fused->name,
          *row.ms / *fused_row->ms, double(variants[i].arrays_moved) / fused->arrays_moved);
    }
    run.table().add(row);
  }
}

}  // namespace

void run_diffusion(int64_t n, const Options& opt, gpu100::DayRun& run) {
  for_each_diffusion_type(
      [&](auto tag) { run_diffusion_type<typename decltype(tag)::type>(n, opt, run); });
}

}  // namespace day03
