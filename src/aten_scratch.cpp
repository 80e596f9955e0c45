#include "aten_scratch.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace metrics::detail {
namespace {

template <class T>
at::Tensor upload_runs(const std::vector<T>& values, const at::TensorOptions& options) {
  if (options.device().is_cpu()) {  // nothing to copy across: the host's values as they are
    auto host = at::from_blob(const_cast<T*>(values.data()), {static_cast<int64_t>(values.size())},
                              at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value));
    return host.to(options.dtype().toScalarType(), /*non_blocking=*/false, /*copy=*/true);
  }
  std::vector<at::Tensor> runs;
  for (size_t start = 0; start < values.size();) {
    auto end = start;
    while (end < values.size() && values[end] == values[start]) ++end;
    runs.push_back(at::full({static_cast<int64_t>(end - start)}, values[start], options));
    start = end;
  }
  if (runs.empty()) return at::empty({0}, options);
  return runs.size() == 1 ? runs.front() : at::cat(runs);
}

}  // namespace

at::Tensor upload(const std::vector<int64_t>& values, const at::TensorOptions& options) {
  return upload_runs(values, options);
}

at::Tensor upload(const std::vector<double>& values, const at::TensorOptions& options) {
  return upload_runs(values, options);
}

bool keeps_key(MetricState& state, size_t slot, const std::vector<int64_t>& key) {
  const auto& kept = state.scratch(slot);  // on the host: read and written without an op
  return kept.defined() && kept.numel() == static_cast<int64_t>(key.size()) &&
         std::equal(key.begin(), key.end(), kept.data_ptr<int64_t>());
}

void keep_key(MetricState& state, size_t slot, const std::vector<int64_t>& key) {
  auto& kept = state.scratch(slot);
  kept = at::empty({static_cast<int64_t>(key.size())}, at::kLong);
  std::copy(key.begin(), key.end(), kept.data_ptr<int64_t>());
}

int64_t bad_updates_offset(const MetricState& state) {
  const auto* tally = state.bad_input();
  return state.offset(tally->counts_slot()) + static_cast<int64_t>(tally->kinds().size());
}

void count_since_bad(MetricState& state, at::Tensor since_bad) {
  at::gt_out(since_bad, state.count_buffer()[bad_updates_offset(state)], 0);
}

}  // namespace metrics::detail
