// Kinds of report made at most once per open file description (Description::reported_once): a program
// that reads a write-only handle in a loop, or keeps failing on a store, hears about it once.
#pragma once

#include "core/file_table.h"

namespace appendguard {

enum ReportOnce : unsigned { kReadReported = 1, kMapReported = 2, kStoreRefusalReported = 4 };

// True the first time `kind` is asked for on `d`.
inline bool first_report_of(Description* d, ReportOnce kind) {
  return !(__atomic_fetch_or(&d->reported_once, kind, __ATOMIC_RELAXED) & kind);
}

inline bool reported_already(const Description* d, ReportOnce kind) {
  return (__atomic_load_n(&d->reported_once, __ATOMIC_RELAXED) & kind) != 0;
}

}  // namespace appendguard
