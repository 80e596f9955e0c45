#include "fuzz_input.h"

#include <ATen/ATen.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <limits>
#include <sstream>

namespace fuzz {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The values where floating-point code goes wrong: NaN, infinities, the largest doubles (inf once
// narrowed to float32), float32's and float16's edges, subnormals of both, and signed zeros.
constexpr double kSpecial[] = {kNaN,    kInf,     -kInf,   1e300,   -1e300,  std::numeric_limits<double>::max(),
                               3.4e38,  -3.4e38,  65504.0, 1e-310,  -1e-310, std::numeric_limits<double>::denorm_min(),
                               1e-40,   -1e-40,   0.0,     -0.0,    1.0,     0.5,
                               1e-8,    -1.0};
constexpr int kSpecials = sizeof(kSpecial) / sizeof(kSpecial[0]);

}  // namespace

bool Source::empty() const { return in_.remaining_bytes() == 0; }

bool Source::one_in(int n) { return in_.ConsumeIntegralInRange<int>(0, n - 1) == 0 && !empty(); }

int64_t Source::range(int64_t lo, int64_t hi) { return in_.ConsumeIntegralInRange<int64_t>(lo, hi); }

double Source::score() {
  const auto kind = in_.ConsumeIntegral<uint8_t>();
  if (kind < 96) return in_.ConsumeIntegral<uint16_t>() / 65535.0;                   // a probability
  if (kind < 160) return (in_.ConsumeIntegral<uint16_t>() / 65535.0 - 0.5) * 16.0;  // a logit
  if (kind < 208) return static_cast<double>(kind % 4);                              // ties, labels
  return kSpecial[kind % kSpecials];
}

double Source::weight() {
  const auto kind = in_.ConsumeIntegral<uint8_t>();
  if (kind < 144) return in_.ConsumeIntegral<uint16_t>() / 32768.0;  // [0, 2]
  if (kind < 200) return static_cast<double>(kind % 3);              // 0, 1, 2
  if (kind < 216) return -static_cast<double>(kind % 4) - 0.5;       // negative: bad input
  return kSpecial[kind % kSpecials];
}

int64_t Source::label(int64_t classes) {
  const auto kind = in_.ConsumeIntegral<uint8_t>();
  if (kind < 224) return kind % classes;
  constexpr int64_t outside[] = {-1, 2, 3, 255, -128, 127, std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min()};
  const int64_t pick = outside[kind % 8];
  return pick == 2 || pick == 3 ? classes + pick - 2 : pick;  // classes, classes + 1
}

std::vector<int64_t> Source::shape(int64_t dims, int64_t max_numel) {
  std::vector<int64_t> sizes;
  int64_t numel = 1;
  for (int64_t d = 0; d < dims; ++d) {
    int64_t size = range(1, 4);
    if (one_in(16)) size = 0;
    if (one_in(8)) size = range(5, 9);
    if (numel * size > max_numel) size = 1;
    numel *= size;
    sizes.push_back(size);
  }
  return sizes;
}

at::ScalarType Source::float_dtype(bool allow_wrong) {
  if (allow_wrong && one_in(24)) return pick({at::kLong, at::kInt, at::kBool});
  return pick({at::kFloat, at::kFloat, at::kFloat, at::kDouble, at::kDouble, at::kHalf, at::kBFloat16});
}

at::ScalarType Source::label_dtype(bool allow_wrong, bool allow_bool) {
  if (allow_wrong && one_in(24)) return pick({at::kFloat, at::kDouble});
  const auto type = pick({at::kLong, at::kLong, at::kLong, at::kInt, at::kByte, at::kChar, at::kBool});
  return type == at::kBool && !allow_bool ? at::kLong : type;
}

at::Tensor Source::values(const std::vector<int64_t>& shape, at::ScalarType dtype, Values kind, int64_t classes) {
  const bool integral = at::isIntegralType(dtype, /*includeBool=*/true);
  auto host = at::empty(shape, integral ? at::kLong : at::kDouble);
  const auto n = host.numel();
  if (integral) {
    auto* data = host.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) data[i] = kind == Values::Labels ? label(classes) : range(0, 2);
  } else {
    auto* data = host.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) {
      if (kind == Values::Weights) {
        data[i] = weight();
      } else if (kind == Values::Labels) {  // float labels: whole numbers, now and then not
        data[i] = one_in(8) ? kSpecial[range(0, kSpecials - 1)] : static_cast<double>(label(classes) % 1000);
      } else {
        data[i] = score();
      }
    }
  }
  return host.to(dtype);
}

at::Tensor Source::lay_out(const at::Tensor& t) {
  const auto dims = t.dim();
  switch (range(0, 7)) {
    case 0:
      if (dims >= 2) return t.transpose(0, dims - 1).contiguous().transpose(0, dims - 1);
      break;
    case 1:
      if (dims >= 1) {  // every other element of a tensor twice as long in the last dimension
        auto sizes = t.sizes().vec();
        sizes.back() *= 2;
        auto big = at::zeros(sizes, t.options());
        auto view = big.slice(dims - 1, 0, sizes.back(), 2);
        view.copy_(t);
        return view;
      }
      break;
    case 2: {  // contiguous, at a storage offset
      auto storage = at::zeros({t.numel() + 3}, t.options());
      auto view = storage.narrow(0, 3, t.numel()).view(t.sizes());
      view.copy_(t);
      return view;
    }
    case 3:
      if (dims >= 1 && t.size(0) > 1) return t.narrow(0, 0, 1).expand(t.sizes());  // stride 0
      break;
    case 4:  // dimension 1 (labels, classes) last in memory, as channels_last
      if (dims >= 3) return t.movedim(1, -1).contiguous().movedim(-1, 1);
      break;
    default:
      break;
  }
  return t;
}

at::Tensor Source::tensor(const std::vector<int64_t>& shape, at::ScalarType dtype, Values kind, int64_t classes) {
  return lay_out(values(shape, dtype, kind, classes));
}

std::string describe_tensor(const at::Tensor& t) {
  std::ostringstream text;
  text << t.scalar_type() << t.sizes();
  if (!t.is_contiguous()) text << " strides " << t.strides();
  if (t.storage_offset() != 0) text << " offset " << t.storage_offset();
  if (t.numel() <= 16) text << " values " << t.to(at::kDouble).flatten();
  return text.str();
}

}  // namespace fuzz
