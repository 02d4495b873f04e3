// CPU unit tests of common/: argument parsing, comparison (NaN-aware), random inputs, the timing
// summary, the results table and its JSON. They need no GPU and run in CI.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/args.hpp"
#include "common/catch.hpp"
#include "common/compare.hpp"
#include "common/errors.hpp"
#include "common/half.hpp"
#include "common/math.hpp"
#include "common/random.hpp"
#include "common/results.hpp"
#include "common/timer.hpp"

using gpu100::ArgParser;
using gpu100::UsageError;

namespace {

ArgParser make_parser() {
  ArgParser p("prog", "test");
  p.add_int("n", "elements", 1000, 1, int64_t(1) << 31);
  p.add_common();
  return p;
}

void parse(ArgParser& p, std::vector<const char*> args) {
  args.insert(args.begin(), "prog");
  p.parse(static_cast<int>(args.size()), args.data());
}

std::string usage_message(std::vector<const char*> args) {
  ArgParser p = make_parser();
  try {
    parse(p, args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("args: defaults and values in every accepted form", "[cpu]") {
  ArgParser p = make_parser();
  parse(p, {});
  CHECK(p.get_int("n") == 1000);
  CHECK(p.get_int("iters") == 20);
  CHECK_FALSE(p.was_set("n"));

  ArgParser q = make_parser();
  parse(q, {"--n", "2^20", "--iters=7", "--json", "out.json", "--no-flush-l2"});
  CHECK(q.get_int("n") == (1 << 20));
  CHECK(q.get_int("iters") == 7);
  CHECK(q.get_string("json") == "out.json");
  CHECK(q.get_flag("no-flush-l2"));
  CHECK(q.was_set("n"));

  ArgParser r = make_parser();
  parse(r, {"--n=1<<10"});
  CHECK(r.get_int("n") == 1024);
}

TEST_CASE("args: bad values are rejected with a one-line message", "[cpu]") {
  CHECK(usage_message({"--n", "0"}) == "--n must be at least 1 (got 0)");
  CHECK(usage_message({"--n", "-5"}) == "--n must be at least 1 (got -5)");
  CHECK(usage_message({"--n", "abc"}).find("expects an integer") != std::string::npos);
  CHECK(usage_message({"--n", "10000000000000"}) ==
        "--n must be at most 2147483648 (got 10000000000000)");
  CHECK(usage_message({"--n", "99999999999999999999999"}).find("out of range") !=
        std::string::npos);
  CHECK(usage_message({"--n", "3^4"}).find("expects an integer") != std::string::npos);
  CHECK(usage_message({"--n", "12abc"}).find("expects an integer") != std::string::npos);
  CHECK(usage_message({"--n"}) == "--n needs a value");
  CHECK(usage_message({"--bogus", "1"}).find("unknown option '--bogus'") != std::string::npos);
  CHECK(usage_message({"stray"}).find("unexpected argument") != std::string::npos);
  CHECK(usage_message({"--list=1"}) == "--list takes no value");
  for (const auto& msg : {usage_message({"--n", "0"}), usage_message({"--iters", "x"})}) {
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("args: --help prints every option and returns false", "[cpu]") {
  ArgParser p = make_parser();
  const char* argv[] = {"prog", "--help"};
  CHECK_FALSE(p.parse(2, argv));
  const std::string h = p.help();
  for (const char* opt :
       {"--n", "--iters", "--warmup", "--variant", "--seed", "--json", "--help"}) {
    CHECK(h.find(opt) != std::string::npos);
  }
}

TEST_CASE("args: split_list", "[cpu]") {
  CHECK(gpu100::split_list("").empty());
  CHECK(gpu100::split_list("a") == std::vector<std::string>{"a"});
  CHECK(gpu100::split_list("a,,b,") == std::vector<std::string>{"a", "b"});
}

TEST_CASE("compare: exact, within tolerance, and beyond it", "[cpu]") {
  const std::vector<double> ref = {1.0, -2.0, 100.0, 0.0};
  const std::vector<float> same = {1.0f, -2.0f, 100.0f, 0.0f};
  auto r = gpu100::compare(ref, same, 0, 0);
  CHECK(r.ok);
  CHECK(r.max_abs == 0);
  CHECK(r.first_bad == -1);

  const std::vector<double> close = {1.0 + 1e-7, -2.0, 100.0 + 1e-5, 1e-9};
  auto c = gpu100::compare(ref, close, 1e-8, 1e-6);
  CHECK(c.ok);
  CHECK(c.max_abs == Catch::Approx(1e-5).epsilon(1e-6));
  CHECK(c.err_over_tol > 0.09);  // the error over the allowance: <= 1 passes
  CHECK(c.err_over_tol <= 1);

  const std::vector<double> far = {1.0, -2.0, 100.1, 0.0};
  auto f = gpu100::compare(ref, far, 1e-8, 1e-6);
  CHECK_FALSE(f.ok);
  CHECK(f.first_bad == 2);
  CHECK(f.num_bad == 1);
  CHECK(f.max_rel == Catch::Approx(1e-3).epsilon(1e-6));
  CHECK(f.err_over_tol == Catch::Approx(0.1 / (1e-8 + 1e-4)).epsilon(1e-6));
  CHECK(f.summary().find("MISMATCH") != std::string::npos);
}

TEST_CASE("compare: worst_of joins checks, record takes any allowance", "[cpu]") {
  gpu100::CompareResult own;
  gpu100::record(own, 0, 10.0, 10.5, 1.0);  // a day's own allowance: passes at 0.5
  gpu100::record(own, 1, 0.0, 0.0, 0.0);    // exact, allowance 0: passes at 0
  CHECK(own.ok);
  CHECK(own.err_over_tol == Catch::Approx(0.5));
  const std::vector<double> ref = {1.0, 2.0};
  const auto bad = gpu100::compare(ref, std::vector<double>{1.0, 2.5}, 0.1, 0);
  const auto all = gpu100::worst_of({own, bad, own});
  CHECK_FALSE(all.ok);
  CHECK(all.first_bad == 1);  // the failing part's index
  CHECK(all.num_bad == 1);
  CHECK(all.count == 2);
  CHECK(all.err_over_tol == Catch::Approx(5.0));
  CHECK(gpu100::worst_of({own, own}).ok);
}

TEST_CASE("compare: NaN never passes, however loose the tolerance", "[cpu]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> ref = {1.0f, 2.0f, 3.0f};
  const std::vector<float> got = {1.0f, nan, 3.0f};
  auto r = gpu100::compare(ref, got, 1e30, 1e30);
  CHECK_FALSE(r.ok);
  CHECK(r.first_bad == 1);
  CHECK(std::isinf(r.max_abs));
  CHECK(std::isinf(r.rel_l2));

  const float inf = std::numeric_limits<float>::infinity();
  CHECK_FALSE(gpu100::compare(ref, std::vector<float>{1.0f, inf, 3.0f}, 1e30, 1e30).ok);
  CHECK_FALSE(gpu100::compare(ref, std::vector<float>{1.0f, 2.0f}, 1, 1).ok);  // size mismatch
}

TEST_CASE("compare: relative L2 error", "[cpu]") {
  const std::vector<double> ref = {3.0, 4.0};  // norm 5
  const std::vector<double> got = {3.0, 4.5};  // error norm 0.5
  CHECK(gpu100::compare(ref, got, 1, 0).rel_l2 == Catch::Approx(0.1));
}

TEST_CASE("random: seeded, reproducible, in range, never zero", "[cpu]") {
  auto a = gpu100::random_vector<float>(100000, 7);
  auto b = gpu100::random_vector<float>(100000, 7);
  auto c = gpu100::random_vector<float>(100000, 8);
  CHECK(a == b);
  CHECK(a != c);
  double sum = 0;
  for (float x : a) {
    REQUIRE(x > -1.0f);
    REQUIRE(x < 1.0f);
    REQUIRE(x != 0.0f);
    sum += x;
  }
  CHECK(std::fabs(sum / a.size()) < 0.01);  // roughly centred
  auto ints = gpu100::random_ints(1000, 3, -5, 5);
  for (int v : ints) REQUIRE((v >= -5 && v <= 5));
  CHECK(gpu100::splitmix64(0) == 0xE220A8397B1DCDAFull);  // the published first output
}

TEST_CASE("timing summary: median and min", "[cpu]") {
  auto odd = gpu100::summarize({3.0f, 1.0f, 2.0f});
  CHECK(odd.median_ms == Catch::Approx(2.0));
  CHECK(odd.min_ms == Catch::Approx(1.0));
  auto even = gpu100::summarize({4.0f, 1.0f, 2.0f, 3.0f});
  CHECK(even.median_ms == Catch::Approx(2.5));
}

TEST_CASE("ceil_div and round_up", "[cpu]") {
  STATIC_REQUIRE(gpu100::ceil_div(1, 256) == 1);
  STATIC_REQUIRE(gpu100::ceil_div(256, 256) == 1);
  STATIC_REQUIRE(gpu100::ceil_div(257, 256) == 2);
  STATIC_REQUIRE(gpu100::round_up(257, 256) == 512);
}

TEST_CASE("results: derived columns, table and JSON", "[cpu]") {
  gpu100::ResultRow row;
  row.variant = "v1_naive";
  row.precision = "fp32";
  row.shape = "n=1000";
  row.ms = 2.0;
  row.ms_min = 1.5;
  row.library = "cub";
  gpu100::set_check(row,
                    gpu100::compare(std::vector<double>{1.0}, std::vector<double>{1.25}, 0.5, 0));
  CHECK(*row.max_abs_err == 0.25);
  CHECK(*row.err_over_tol == 0.5);
  gpu100::derive(row, 4e9, 0, 4000.0, 20.0, 3.0);
  CHECK(*row.gbps == Catch::Approx(2000.0));
  CHECK(*row.pct_of_ceiling == Catch::Approx(50.0));
  CHECK(*row.speedup_vs_cpu == Catch::Approx(10.0));
  CHECK(*row.ratio_vs_library == Catch::Approx(1.5));
  CHECK_FALSE(row.tflops.has_value());

  gpu100::ResultTable table;
  table.add(row);
  gpu100::ResultRow bad;
  bad.variant = "broken \"quoted\"";
  bad.ok = false;
  bad.note = "a note";
  table.add(bad);
  CHECK_FALSE(table.all_ok());
  gpu100::ResultRow info_only = gpu100::make_row("h2d", "fp32", "1 B");
  info_only.verified = false;
  table.add(info_only);

  const std::string text = table.format();
  CHECK(text.find("v1_naive") != std::string::npos);
  CHECK(text.find("2000.0") != std::string::npos);
  CHECK(text.find("50.0%") != std::string::npos);
  CHECK(text.find("err/tol") != std::string::npos);
  CHECK(text.find("0.50") != std::string::npos);
  CHECK(text.find("FAIL") != std::string::npos);
  CHECK(text.find("note: broken \"quoted\": a note") != std::string::npos);
  CHECK(text.find("verdict: FAIL, 1 of 2 rows failed verification") != std::string::npos);

  gpu100::RunInfo info;
  info.day = "day00";
  info.gpu = "Test GPU";
  info.ceiling_gbps = 4000;
  const std::string json = table.to_json(info);
  CHECK(json.find("\"day\": \"day00\"") != std::string::npos);
  CHECK(json.find("\"ceiling_gbps\": 4000") != std::string::npos);
  CHECK(json.find("\"gbps\": 2000, \"tflops\": null") != std::string::npos);
  CHECK(json.find("\"variant\": \"broken \\\"quoted\\\"\"") != std::string::npos);
  CHECK(json.find("\"ok\": false") != std::string::npos);
  CHECK(json.find("\"ok\": null") != std::string::npos);
  CHECK(json.find("\"note\": \"a note\"") != std::string::npos);
  CHECK(json.find("\"note\": null") != std::string::npos);
  for (const char* key : {"\"cuda\"", "\"git\"", "\"timestamp\"", "\"cases\"", "\"ms_min\"",
                          "\"pct_of_ceiling\"", "\"speedup_vs_cpu\"", "\"library\"",
                          "\"ratio_vs_library\"", "\"max_abs_err\"", "\"err_over_tol\""}) {
    CHECK(json.find(key) != std::string::npos);
  }
}

TEST_CASE("results: JSON escaping", "[cpu]") {
  CHECK(gpu100::json_escape("a\"b\\c\nd\x01") == "a\\\"b\\\\c\\nd\\u0001");
}

TEST_CASE("errors: guarded_main maps exceptions to exit statuses", "[cpu]") {
  char arg0[] = "prog";
  char* argv[] = {arg0, nullptr};
  CHECK(gpu100::guarded_main(1, argv, [](int, char**) { return 0; }) == gpu100::kExitOk);
  CHECK(gpu100::guarded_main(1, argv, [](int, char**) -> int { throw UsageError("bad"); }) ==
        gpu100::kExitUsage);
  CHECK(gpu100::guarded_main(1, argv, [](int, char**) -> int {
          throw gpu100::NoGpuError("none");
        }) == gpu100::kExitNoGpu);
  CHECK(gpu100::guarded_main(1, argv, [](int, char**) -> int {
          throw std::runtime_error("boom");
        }) == gpu100::kExitFailed);
}

TEST_CASE("half: bf16 and fp16 round trips and compare", "[cpu]") {
  const std::vector<float> x = {1.0f, -0.5f, 3.140625f, 1.0f + 1.0f / 512};
  const auto bf = gpu100::round_trip<__nv_bfloat16>(x);
  CHECK(bf[0] == 1.0f);
  CHECK(bf[1] == -0.5f);
  CHECK(bf[2] == 3.140625f);  // 8 significant bits: exactly representable
  CHECK(bf[3] == 1.0f);       // 1 + 2^-9 rounds to 1 in bf16 (spacing 2^-7 near 1)
  const auto h = gpu100::round_trip<__half>(x);
  CHECK(h[3] == 1.0f + 1.0f / 512);  // fp16 keeps it (spacing 2^-10)
  const auto bf_vec = gpu100::convert_from_float<__nv_bfloat16>(x);
  CHECK(gpu100::compare(x, bf_vec, 0, 1e-2).ok);
  CHECK_FALSE(gpu100::compare(x, bf_vec, 0, 0).ok);
}

TEST_CASE("half: TF32 rounding keeps 10 mantissa bits, to nearest, ties away from zero", "[cpu]") {
  const float ulp = 1.0f / 1024;  // TF32's spacing just above 1
  const std::vector<float> x = {1.0f,
                                1.0f + ulp,
                                1.0f + ulp / 4,      // below half an ulp: down
                                1.0f + ulp * 3 / 4,  // above half: up
                                1.0f + ulp / 2,      // a tie: away from zero
                                -(1.0f + ulp / 2),   // a negative tie: away from zero too
                                2.0f - ulp / 4,      // rounds up into the next binade
                                INFINITY,
                                0.0f};
  const std::vector<float> want = {1.0f,          1.0f + ulp, 1.0f,     1.0f + ulp, 1.0f + ulp,
                                   -(1.0f + ulp), 2.0f,       INFINITY, 0.0f};
  REQUIRE(gpu100::round_to_tf32(x) == want);
  REQUIRE(std::isnan(gpu100::round_to_tf32({NAN})[0]));
}

TEST_CASE("results: the timing line every binary prints", "[cpu]") {
  CHECK(gpu100::timing_line(20, 5, true) ==
        "timing: median of 20 runs after 5 warm-ups, L2 flushed before each run");
  CHECK(gpu100::timing_line(3, 0, false) ==
        "timing: median of 3 runs after 0 warm-ups, L2 not flushed");
}

TEST_CASE("arch: the rebuild line names the GPU, what the build holds and the command", "[cpu]") {
  const std::string line = gpu100::rebuild_message("NVIDIA H100 80GB HBM3", 9, 0, "89-real");
  CHECK(line ==
        "this build holds no code for the NVIDIA H100 80GB HBM3 (sm_90): it was built for "
        "CMAKE_CUDA_ARCHITECTURES=89-real; rebuild with ./scripts/setup.sh "
        "-DCMAKE_CUDA_ARCHITECTURES=90a");
  CHECK(line.find('\n') == std::string::npos);
  CHECK(gpu100::rebuild_message("Tesla T4", 7, 5, "90a").find("-DCMAKE_CUDA_ARCHITECTURES=75") !=
        std::string::npos);
  CHECK(gpu100::recommended_architecture(9, 0) == "90a");
  CHECK(gpu100::recommended_architecture(8, 6) == "86");
}

TEST_CASE("arch: the architecture list a build was configured with", "[cpu]") {
  CHECK(gpu100::parse_architectures("75").max_arch == 750);
  CHECK_FALSE(gpu100::parse_architectures("75").sm90a);
  CHECK(gpu100::parse_architectures("80-virtual").max_arch == 800);
  const gpu100::BuiltArchs several = gpu100::parse_architectures("75,86-real,90a");
  CHECK(several.max_arch == 900);
  CHECK(several.sm90a);
  CHECK_FALSE(gpu100::parse_architectures("90").sm90a);
  CHECK(gpu100::parse_architectures("native").max_arch == 0);
  CHECK(std::string(gpu100::needs_text(gpu100::ArchNeed::kSm90a)) == "needs an sm_90a build");
  CHECK(std::string(gpu100::needs_text(gpu100::ArchNeed::kAny)).empty());
}

TEST_CASE("arch: a variant the build cannot hold is refused with exit status 2", "[cpu]") {
  struct V {
    const char* name;
    gpu100::ArchNeed needs;
  };
  const std::vector<V> registry = {{"plain", gpu100::ArchNeed::kAny},
                                   {"future", gpu100::ArchNeed::kSm90a}};
  // Naming only variants every build has is fine.
  gpu100::refuse_named_not_built(registry, {"plain"});
  if (!gpu100::build_lists(gpu100::ArchNeed::kSm90a)) {
    try {
      gpu100::refuse_named_not_built(registry, {"future"});
      FAIL("no exception");
    } catch (const gpu100::UsageError& e) {  // ArchUnavailable is a UsageError: exit 2
      CHECK(std::string(e.what()).find("future needs an sm_90a build") != std::string::npos);
    }
  }
}

TEST_CASE("args: an old spelling still sets the renamed option, and defaults lie in their ranges",
          "[cpu]") {
  ArgParser p("prog", "test");
  p.add_int("batch", "batch size", 8, 1, 64);
  p.add_alias("b", "batch");
  parse(p, {"--b", "3"});
  CHECK(p.get_int("batch") == 3);
  CHECK(p.was_set("batch"));
  ArgParser q("prog", "test");
  q.add_int("batch", "batch size", 8, 1, 64);
  q.add_alias("b", "batch");
  try {
    parse(q, {"--b=0"});
    FAIL("no exception");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) == "--batch must be at least 1 (got 0)");
  }
  ArgParser r("prog", "test");
  CHECK_THROWS_AS(r.add_int("h", "height", 0, 1, 10), std::logic_error);  // default outside
  r.add_int("w", "width", 5, 1, 10);
  CHECK_THROWS_AS(r.add_alias("x", "missing"), std::logic_error);
  CHECK_THROWS_AS(r.add_alias("w", "w"), std::logic_error);
}
