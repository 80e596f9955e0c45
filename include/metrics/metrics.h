#pragma once

// Everything nosync-metrics offers, in one include.

#include <metrics/aggregation.h>
#include <metrics/backend.h>
#include <metrics/bad_input.h>
#include <metrics/checkpoint.h>
#include <metrics/classification.h>
#include <metrics/classification_options.h>
#include <metrics/collection.h>
#include <metrics/distributed.h>
#include <metrics/functional/classification.h>
#include <metrics/metric.h>
#include <metrics/metric_state.h>
#include <metrics/nan_policy.h>
#include <metrics/report_context.h>
#include <metrics/shape_error.h>
#include <metrics/state_entry.h>
#include <metrics/sync_counter.h>
#include <metrics/update_args.h>
#include <metrics/update_call.h>
#include <metrics/warning_capture.h>
