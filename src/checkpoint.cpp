#include <metrics/checkpoint.h>

#include <ATen/core/Dict.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>
#include <ios>
#include <iterator>
#include <vector>

#include "error_context.h"
#include "host_copy.h"

namespace metrics {
namespace {

void write(const StateDict& state, const std::string& who, const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [key, tensor] : state) dict.insert(key, detail::host_copy(tensor));
  const auto bytes = torch::jit::pickle_save(dict);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  TORCH_CHECK_VALUE(out.good(), who, ".save_checkpoint: cannot write '", path, "'");
}

std::vector<char> read_bytes(const std::string& who, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK_VALUE(in.good(), who, ".load_checkpoint: cannot open '", path, "'");
  std::vector<char> bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {  // a directory opens, and fails on the first read
    TORCH_CHECK_VALUE(false, who, ".load_checkpoint: cannot read '", path, "': ", e.what());
  }
  return bytes;
}

StateDict read(const std::string& who, const std::string& path) {
  const auto bytes = read_bytes(who, path);
  c10::IValue loaded;
  try {
    loaded = torch::jit::pickle_load(bytes);
  } catch (const c10::Error& e) {
    TORCH_CHECK_VALUE(false, who, ".load_checkpoint: '", path, "' is not a readable checkpoint (truncated, ",
                      "corrupted, or a torch.save of an OrderedDict, as nn.Module's state_dict() gives, which ",
                      "LibTorch cannot read: save a dict): ", e.what_without_backtrace());
  }
  TORCH_CHECK_VALUE(loaded.isGenericDict(), who, ".load_checkpoint: '", path, "' holds no state dict");
  StateDict state;
  for (const auto& item : loaded.toGenericDict()) {
    TORCH_CHECK_VALUE(item.key().isString() && item.value().isTensor(), who, ".load_checkpoint: '", path,
                      "' holds no state dict (a dict of str to tensor)");
    state.emplace(item.key().toStringRef(), item.value().toTensor());
  }
  return state;
}

// Loads the checkpoint at `path` into `target` (a metric or a collection), naming the path in the
// ValueError of a state that the target refuses.
template <typename Target>
void load(Target& target, const std::string& who, const std::string& path) {
  const auto state = read(who, path);
  detail::with_context(c10::str(who, ".load_checkpoint: '", path, "' holds a state this one refuses: "),
                       [&] { target.load_state_dict(state); });
}

}  // namespace

void save_checkpoint(const Metric& metric, const std::string& path) {
  write(metric.state_dict(), metric.name(), path);
}

void load_checkpoint(Metric& metric, const std::string& path) {
  load(metric, metric.name(), path);
}

void save_checkpoint(const MetricCollection& collection, const std::string& path) {
  write(collection.state_dict(), "MetricCollection", path);
}

void load_checkpoint(MetricCollection& collection, const std::string& path) {
  load(collection, "MetricCollection", path);
}

}  // namespace metrics
