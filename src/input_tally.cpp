#include "input_tally.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

namespace metrics::detail {
namespace {
constexpr int64_t kNoBadUpdate = std::numeric_limits<int64_t>::max();
}

void tally_on_device(MetricState& state, const at::Tensor& kind_counts, int64_t update_index) {
  auto& counts = state.bad_input_counts();
  auto& first = state.first_bad_update();
  const auto kinds = kind_counts.size(0);
  const auto any = kind_counts.sum().clamp_max_(1);
  counts.narrow(0, 0, kinds).add_(kind_counts);
  counts.narrow(0, kinds, 1).add_(any);
  // first = min(first, any ? update_index : kNoBadUpdate), without a host branch
  at::minimum_out(first, first, any.mul(kNoBadUpdate - update_index).neg_().add_(kNoBadUpdate));
}

void tally_on_host(MetricState& state, c10::ArrayRef<int64_t> kind_counts, int64_t update_index) {
  if (std::all_of(kind_counts.begin(), kind_counts.end(), [](int64_t c) { return c == 0; })) return;
  auto& counts = state.bad_input_counts();
  auto& first = state.first_bad_update();
  const auto kinds = static_cast<int64_t>(kind_counts.size());
  if (counts.is_cpu()) {
    auto* data = counts.data_ptr<int64_t>();
    for (int64_t k = 0; k < kinds; ++k) data[k] += kind_counts[k];
    data[kinds] += 1;
    auto* first_data = first.data_ptr<int64_t>();
    *first_data = std::min(*first_data, update_index);
    return;
  }
  for (int64_t k = 0; k < kinds; ++k) {
    if (kind_counts[k] != 0) counts.narrow(0, k, 1).add_(kind_counts[k]);
  }
  counts.narrow(0, kinds, 1).add_(1);
  first.clamp_max_(update_index);
}

}  // namespace metrics::detail
