// The vector argmax kernels against torch.argmax, on every instruction set this CPU has.

#include <ATen/ATen.h>

#include <limits>
#include <vector>

#include "../src/classification/argmax_cpu.h"
#include "test_support.h"

namespace metrics::detail::cpu {
namespace {

void expect_like_torch(const at::Tensor& row, Isa isa) {
  const auto* x = row.data_ptr<float>();
  const int64_t n = row.numel();
  const int64_t expected = at::isnan(row).any().item<bool>() ? -1 : row.argmax().item<int64_t>();
  EXPECT_EQ(first_argmax_with(x, n, isa), expected) << "n=" << n << " isa=" << static_cast<int>(isa) << "\n" << row;
}

TEST(Argmax, MatchesTorchOnRandomRowsTiesInfinitiesAndNaN) {
  auto gen = testing::generator(3);
  for (auto isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (!isa_available(isa)) continue;
    std::vector<int64_t> lengths = {96, 128, 1024};  // long rows whose last block is full
    for (int64_t n = 1; n <= 1100; n += (n < 70 ? 1 : n < 300 ? 23 : 97)) lengths.push_back(n);
    for (const int64_t n : lengths) {
      for (int trial = 0; trial < 11; ++trial) {
        auto row = at::randn({n}, gen);
        if (trial == 1) row = row.round();                 // many ties
        if (trial == 2) row.fill_(-std::numeric_limits<float>::infinity());
        if (trial == 3) row[n - 1] = 100.0;                // the maximum in the tail
        if (trial == 4) row[(n * 7) / 11] = std::numeric_limits<float>::quiet_NaN();
        if (trial == 5) row.fill_(0.0), row[n / 2] = -0.0;  // signed zeros tie
        if (trial == 6) row[n - 1] = 100.0, row[(n * 3) / 5] = 100.0;  // tied maxima, in other lanes and blocks
        // a NaN with the sign bit set, last (in the short rows' overlap, the long rows' tail)
        if (trial == 7) row[n - 1] = -std::numeric_limits<float>::quiet_NaN();
        if (trial == 8) row[(n * 2) / 3] = std::numeric_limits<float>::infinity(), row[n - 1] = row[(n * 2) / 3];
        // tied maxima, the first where the moved-back last block repeats elements (AVX2, AVX-512)
        if (trial == 9 && n >= 20) row[n - 20] = 100.0, row[n - 1] = 100.0;
        if (trial == 10 && n >= 50) row[n - 50] = 100.0, row[n - 1] = 100.0;
        expect_like_torch(row, isa);
      }
    }
  }
}

TEST(TopK, CountsHigherScoresAndEarlierTies) {
  const float x[] = {0.5f, 0.9f, 0.5f, 0.1f};
  EXPECT_TRUE(in_top_k(x, 4, 1, 1));
  EXPECT_FALSE(in_top_k(x, 4, 0, 1));
  EXPECT_TRUE(in_top_k(x, 4, 0, 2));   // the first of the tied 0.5s ranks second
  EXPECT_FALSE(in_top_k(x, 4, 2, 2));  // the second ranks third
  EXPECT_TRUE(in_top_k(x, 4, 2, 3));
}

}  // namespace
}  // namespace metrics::detail::cpu
