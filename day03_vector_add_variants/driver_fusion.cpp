// day03_vector_add_variants' driver, the fusion part: y = silu(a + b * c) as one kernel against
// the chains of three and four kernels an eager framework runs. The compulsory bytes are the same
// for all of them; the chains move more, and their byte count bounds what fusion can gain.
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

}  // namespace day03
