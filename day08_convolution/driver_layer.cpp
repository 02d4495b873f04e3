// day08_convolution's driver, the Conv2d layer's rows: each selected variant is checked with
// LayerCheck (the CPU at sampled outputs, cuDNN's whole output) and timed; cuDNN's rows
// are the library each precision is compared with.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "conv_layer.hpp"
#include "driver.hpp"

namespace day08 {

namespace {

using gpu100::ResultRow;
using Prec = ConvPrecision;

// "" when the variant runs here, else the note of its skipped row.
std::string skip_note(const Options& opt, const Conv2dVariant& v, ConvLayer& layer) {
  if (v.is_library && !have_cudnn()) return "skipped: cuDNN not found";
  if (v.refusal != nullptr) {
    if (const std::string why = v.refusal(opt.shape, opt.bias); !why.empty()) {
      return "refused: " + why;
    }
  }
  if (v.is_library && v.takes_bf16_nhwc()) {
    if (const std::string err = first_library_call(layer, v, opt.bias); !err.empty()) {
      return "skipped: " + err;
    }
  }
  return "";
}

ResultRow conv_row(const Options& opt, const Conv2dVariant& v, ConvLayer& layer,
                   const LayerCheck& check, gpu100::DayRun& run) {
  const std::string shape = to_string(opt.shape) + (opt.bias ? " +bias" : "");
  const std::string prec = to_string(v.precision);
  if (const std::string note = skip_note(opt, v, layer); !note.empty()) {
    ResultRow row = gpu100::make_row(v.name, prec, shape);
    row.verified = false;
    row.note = note;
    return row;
  }
  // The checked call is also the untimed first one: cuDNN's Find and workspace, v3's scratch.
  ResultRow row = run.measure(
      v.name, prec, shape, [&] { layer.poison(); }, [&] { layer.launch(v, opt.bias); },
      [&] { return check(v); });
  const bool is16 = v.takes_bf16_nhwc();
  if (v.is_library) {
    if (row.note.empty())
      row.note = "algorithm " + cudnn_choice(opt.shape, v.precision, v.takes_nhwc());
    if (is16 && row.ok) row.note += "; bf16 NHWC x, w and y (cuDNN's one bf16 configuration)";
    if (v.y_f32_npqk && row.ok) row.note += "; fp32 NHWC x, w and y, as the NHWC variants take";
  } else if (is16 && row.ok) {
    row.note =
        "bf16 NHWC x, KRSC w (converted once on the host, not timed), fp32 accumulation, fp32 "
        "NKPQ y; checked on the bf16-rounded inputs";
  } else if (v.takes_f32_nhwc() && row.ok) {
    row.note =
        "fp32 NHWC x, KRSC w (converted once on the host, not timed), multiplied as TF32, fp32 "
        "NKPQ y";
  }
  const double bytes = is16 ? conv2d_bytes_bf16(opt.shape, opt.bias, v.y_bf16_npqk)
                            : conv2d_bytes(opt.shape, opt.bias);
  gpu100::derive(row, bytes, conv2d_flops(opt.shape), run.ceiling_gbps(), 0, 0);
  return row;
}

}  // namespace

std::string run_conv2d(const Options& opt, gpu100::DayRun& run) {
  bool any_bf16 = false, any_f32_nhwc = false;
  for (const auto& v : conv2d_variants()) {
    const bool runs = opt.selected(v.name) && gpu100::build_has(v.needs);
    any_bf16 |= v.takes_bf16_nhwc() && runs;
    any_f32_nhwc |= v.takes_f32_nhwc() && runs;
  }
  ConvLayer layer(opt.shape, opt.common.seed + 20, any_bf16, any_f32_nhwc);
  const LayerCheck check(layer, opt.bias, opt.common.seed);
  std::vector<ResultRow> rows;
  std::vector<const Conv2dVariant*> ran;
  for (const auto& v : conv2d_variants()) {
    if (!opt.selected(v.name) || !gpu100::build_has(v.needs)) continue;
    rows.push_back(conv_row(opt, v, layer, check, run));
    if (!v.is_library) rows.back().library = v.library;
    ran.push_back(&v);
  }
  gpu100::link_libraries(rows);  // x cuDNN of the same precision
  std::string summary;
  for (Prec p : {Prec::kFp32, Prec::kTf32, Prec::kBf16}) {
    const ResultRow* best = nullptr;
    for (size_t i = 0; i < rows.size(); ++i) {
      const ResultRow& r = rows[i];
      if (ran[i]->precision == p && !ran[i]->is_library && r.ok && r.ms &&
          (best == nullptr || *r.ms < *best->ms)) {
        best = &r;
      }
    }
    if (best == nullptr) continue;
    std::string part = fmt::format("best {} {:.1f} TFLOP/s", best->variant, *best->tflops);
    if (best->library)
      part += fmt::format(" = {:.2f}x {}", *best->ratio_vs_library, *best->library);
    gpu100::append(summary, part);
  }
  for (auto& r : rows) run.table().add(r);
  return summary;
}

}  // namespace day08
