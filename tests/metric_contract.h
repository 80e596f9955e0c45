#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include <metrics/collection.h>
#include <metrics/metric.h>

namespace metrics::testing {

/// One configuration for the contract tests: how to build a metric, and how to feed it batch i
/// of a fixed stream (the same i always gives the same batch, wherever it is fed). A collection
/// case sets make_collection and update_collection instead of make and update.
struct ContractCase {
  std::string name;
  std::function<std::unique_ptr<Metric>()> make;
  std::function<void(Metric&, int64_t batch)> update;
  int64_t batches = 6;
  std::function<MetricCollection()> make_collection = nullptr;
  std::function<void(MetricCollection&, int64_t batch)> update_collection = nullptr;
};

inline std::ostream& operator<<(std::ostream& out, const ContractCase& c) { return out << c.name; }

/// Instantiate with INSTANTIATE_TEST_SUITE_P(Family, MetricContract, ::testing::ValuesIn(cases)).
class MetricContract : public ::testing::TestWithParam<ContractCase> {};

inline std::string contract_case_name(const ::testing::TestParamInfo<ContractCase>& info) { return info.param.name; }

}  // namespace metrics::testing
