#include <metrics/distributed.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <algorithm>
#include <limits>

#include "host_copy.h"
#include "update_locks.h"

namespace metrics {
namespace {

c10d::ReduceOp reduce_op(Reduction reduction) {
  switch (reduction) {
    case Reduction::Sum:
      return c10d::ReduceOp::SUM;
    case Reduction::Min:
      return c10d::ReduceOp::MIN;
    case Reduction::Max:
      return c10d::ReduceOp::MAX;
    case Reduction::Cat:  // gathered (gather_rows), never reduced
      break;
  }
  TORCH_INTERNAL_ASSERT(false, "no reduce op for ", reduction_name(reduction));
}

// FNV-1a: the same value for the same text in every process (std::hash promises no such thing).
int64_t fingerprint(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return static_cast<int64_t>(hash);
}

std::vector<at::Tensor> all_gather(c10d::ProcessGroup& group, const at::Tensor& tensor) {
  std::vector<at::Tensor> input{tensor};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int rank = 0; rank < group.getSize(); ++rank) output[0].push_back(at::empty_like(tensor));
  group.allgather(output, input)->wait();
  for (auto& t : output[0]) t = detail::host_copy(t);
  return output[0];
}

// One all-gather of (fingerprint, length) per sync; only when they differ, a second one of the
// texts, to name the first difference. Every rank sees the same data, so every rank raises.
void check_same_on_every_rank(const std::string& text, c10d::ProcessGroup& group, const std::string& who,
                              at::Device device) {
  const auto mine = at::tensor({fingerprint(text), static_cast<int64_t>(text.size())}, at::kLong).to(device);
  const auto gathered = all_gather(group, mine);
  int64_t longest = 0;
  bool same = true;
  for (const auto& t : gathered) {
    same = same && t.equal(gathered.front());
    longest = std::max(longest, t[1].item<int64_t>());
  }
  if (same) return;
  auto bytes = at::zeros({longest}, at::kByte);
  std::copy(text.begin(), text.end(), bytes.data_ptr<uint8_t>());
  std::vector<std::string> texts;
  for (const auto& t : all_gather(group, bytes.to(device))) {
    const auto* data = t.data_ptr<uint8_t>();
    std::string text(data, data + t.numel());
    texts.push_back(text.substr(0, text.find('\0')));  // without the zero padding
  }
  check_same_texts(texts, who);
}

// Every rank's row counts of each row entry: one all-gather for them all. counts[rank][entry].
std::vector<std::vector<int64_t>> gather_row_counts(c10d::ProcessGroup& group, const std::vector<PackedState::Rows>& rows,
                                                    at::Device device) {
  std::vector<int64_t> mine;
  for (const auto& entry : rows) mine.push_back(entry.tensor.size(0));
  std::vector<std::vector<int64_t>> counts;
  for (const auto& theirs : all_gather(group, at::tensor(mine, at::kLong).to(device))) {
    counts.emplace_back(theirs.data_ptr<int64_t>(), theirs.data_ptr<int64_t>() + theirs.numel());
  }
  return counts;
}

// Every rank's rows of entry `e`, in rank order, from one all-gather of the rows padded to the longest.
at::Tensor gather_rows(c10d::ProcessGroup& group, const at::Tensor& rows, const std::vector<std::vector<int64_t>>& counts,
                       size_t e) {
  const auto device = collective_device(group.getBackendName(), rows.device());
  int64_t longest = 0;
  for (const auto& theirs : counts) longest = std::max(longest, theirs[e]);
  auto shape = rows.sizes().vec();
  shape[0] = longest;
  auto padded = at::zeros(shape, rows.options().device(device));
  padded.narrow(0, 0, rows.size(0)).copy_(rows);
  std::vector<at::Tensor> parts;
  const auto gathered = all_gather(group, padded);
  for (size_t rank = 0; rank < gathered.size(); ++rank) parts.push_back(gathered[rank].narrow(0, 0, counts[rank][e]));
  return at::cat(parts).to(rows.device());
}

// A Min or Max buffer of floating values as PackedState sends it: NaN replaced by the reduction's
// identity, a flag per value after them; other buffers as they are.
at::Tensor nan_carrying(const at::Tensor& values, Reduction reduction) {
  if (reduction == Reduction::Sum || !at::isFloatingType(values.scalar_type())) return values;
  const bool is_min = reduction == Reduction::Min;
  const auto nan = values.isnan();
  const auto identity = (is_min ? 1 : -1) * std::numeric_limits<double>::infinity();
  return at::cat({values.masked_fill(nan, identity), nan.to(values.scalar_type()) * (is_min ? -1 : 1)});
}

void all_reduce(PackedState& packed, c10d::ProcessGroup& group) {
  const auto backend = group.getBackendName();
  auto& rows = packed.rows();
  if (!rows.empty()) {
    const auto counts = gather_row_counts(group, rows, collective_device(backend, rows.front().tensor.device()));
    for (size_t e = 0; e < rows.size(); ++e) rows[e].tensor = gather_rows(group, rows[e].tensor, counts, e);
  }
  for (auto& buffer : packed.buffers()) {
    const auto device = collective_device(backend, buffer.tensor.device());
    std::vector<at::Tensor> tensors{buffer.tensor.to(device)};
    c10d::AllreduceOptions options;
    options.reduceOp = reduce_op(buffer.reduction);
    group.allreduce(tensors, options)->wait();
    buffer.tensor.copy_(tensors.front());  // a no-op where the collective ran in place
  }
}

}  // namespace

PackedState::PackedState(const std::vector<StateEntry>& entries) {
  std::vector<std::vector<at::Tensor>> parts;
  std::vector<int64_t> sizes;
  for (const auto& entry : entries) {
    if (entry.reduction == Reduction::Cat) {
      rows_.push_back({entry.name, entry.tensor.clone()});
      continue;
    }
    const auto dtype = entry.tensor.scalar_type();
    size_t b = 0;
    while (b < buffers_.size() &&
           (buffers_[b].reduction != entry.reduction || parts[b].front().scalar_type() != dtype)) {
      ++b;
    }
    if (b == buffers_.size()) {
      buffers_.push_back({entry.reduction, at::Tensor()});
      parts.emplace_back();
      sizes.push_back(0);
    }
    const auto device = parts[b].empty() ? entry.tensor.device() : parts[b].front().device();
    parts[b].push_back(entry.tensor.reshape({-1}).to(device));
    slots_.push_back({entry.name, b, sizes[b], entry.tensor.sizes().vec()});
    sizes[b] += entry.tensor.numel();
  }
  for (size_t b = 0; b < buffers_.size(); ++b) {
    auto values = at::cat(parts[b]);
    value_counts_.push_back(values.numel());
    buffers_[b].tensor = nan_carrying(values, buffers_[b].reduction);
  }
}

StateDict PackedState::unpack() const {
  StateDict dict;
  for (const auto& slot : slots_) {
    const auto& buffer = buffers_[slot.buffer].tensor;
    const auto numel = c10::multiply_integers(slot.shape);
    auto values = buffer.narrow(0, slot.offset, numel).clone();
    if (carries_nan(slot.buffer)) {
      const auto flags = buffer.narrow(0, value_counts_[slot.buffer] + slot.offset, numel);
      values.masked_fill_(flags != 0, std::numeric_limits<double>::quiet_NaN());
    }
    dict.emplace(slot.name, values.view(slot.shape));
  }
  for (const auto& rows : rows_) dict.emplace(rows.name, rows.tensor.clone());
  return dict;
}

std::string describe_for_sync(const MetricCollection& collection) {
  std::string text;
  for (const auto& name : collection.names()) text += name + ": " + collection.at(name).description();
  for (const auto& group : collection.groups()) {
    text += "group:";
    for (const auto& name : group) text += " " + name;
    text += "\n";
  }
  return text;
}

void check_same_texts(const std::vector<std::string>& texts, const std::string& who) {
  for (size_t rank = 1; rank < texts.size(); ++rank) {
    const auto difference = first_difference(texts[0], texts[rank]);
    TORCH_CHECK_VALUE(difference.empty(), who, ".sync: every rank must hold the same metrics, but rank 0 has ",
                      difference, " on rank ", rank);
  }
}

at::Device collective_device(const std::string& backend, at::Device state_device) {
  if (backend == "nccl" && !state_device.is_cuda()) return at::Device(at::kCUDA);
  return state_device;
}

PackedState packed_state(const Metric& metric) {
  const detail::UpdateLocks locks(metric.state(), metric.state());
  return PackedState(metric.state().entries());
}

std::unique_ptr<Metric> synced(const Metric& metric, c10d::ProcessGroup& group) {
  const auto device = collective_device(group.getBackendName(), metric.device());
  check_same_on_every_rank(metric.description(), group, metric.name(), device);
  auto packed = packed_state(metric);
  all_reduce(packed, group);
  auto copy = metric.clone();
  copy->load_state_dict(packed.unpack());
  return copy;
}

MetricCollection synced(const MetricCollection& collection, c10d::ProcessGroup& group) {
  const auto entries = collection.state_entries();
  TORCH_CHECK_VALUE(!entries.empty(), "MetricCollection.sync: the collection is empty");
  const auto device = collective_device(group.getBackendName(), entries.front().tensor.device());
  check_same_on_every_rank(describe_for_sync(collection), group, "MetricCollection", device);
  PackedState packed(entries);
  all_reduce(packed, group);
  auto copy = collection.clone();
  copy.load_state_entries(packed.unpack());
  return copy;
}

}  // namespace metrics
