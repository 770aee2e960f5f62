#include "runtime/scheduler/resources.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace troupe {
namespace scheduler {

ResourceNames::ResourceNames() {
  Intern("CPU");
  Intern("GPU");
  Intern("memory");
}

ResourceId ResourceNames::Intern(absl::string_view name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  const ResourceId id = static_cast<ResourceId>(names_.size());
  names_.emplace_back(name);
  ids_.emplace(std::string(name), id);
  return id;
}

std::optional<ResourceId> ResourceNames::Find(absl::string_view name) const {
  auto it = ids_.find(name);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<int64_t> ToUnits(absl::string_view name, double amount) {
  if (name.empty()) return absl::InvalidArgumentError("resource name is empty");
  if (!std::isfinite(amount) || amount < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("resource ", name, ": amount ", amount, " must be a finite number >= 0"));
  }
  if (amount > kMaxResourceAmount) {
    return absl::InvalidArgumentError(absl::StrCat("resource ", name, ": amount ", amount,
                                                   " exceeds the maximum of ", kMaxResourceAmount));
  }
  const int64_t units = std::llround(amount * kUnitsPerWhole);
  if (name == "GPU" && units % kUnitsPerWhole != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("resource GPU: amount ", amount,
                     " is fractional; GPUs are whole numbers (ask for 1, 2, ... GPUs)"));
  }
  return units;
}

double ToAmount(int64_t units) { return static_cast<double>(units) / kUnitsPerWhole; }

std::string FormatUnits(int64_t units) {
  const int64_t whole = units / kUnitsPerWhole;
  int64_t frac = units % kUnitsPerWhole;
  if (frac == 0) return absl::StrCat(whole);
  std::string out = absl::StrCat(units < 0 && whole == 0 ? "-" : "", whole, ".");
  if (frac < 0) frac = -frac;
  std::string digits = absl::StrFormat("%04d", frac);
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  return out + digits;
}

absl::StatusOr<ResourceRequest> ResourceRequest::FromMap(const ResourceMap& amounts,
                                                         ResourceNames* names) {
  ResourceRequest out;
  for (const auto& [name, amount] : amounts) {
    absl::StatusOr<int64_t> units = ToUnits(name, amount);
    if (!units.ok()) return units.status();
    if (*units == 0) continue;
    out.Add(names->Intern(name), *units);
  }
  return out;
}

void ResourceRequest::Add(ResourceId id, int64_t units) {
  if (units <= 0) return;
  auto it = std::lower_bound(entries_.begin(), entries_.end(), id,
                             [](const Entry& e, ResourceId v) { return e.id < v; });
  if (it != entries_.end() && it->id == id) {
    it->units = units > std::numeric_limits<int64_t>::max() - it->units
                    ? std::numeric_limits<int64_t>::max()
                    : it->units + units;
  } else {
    entries_.insert(it, Entry{id, units});
  }
}

void ResourceRequest::AddAll(const ResourceRequest& other) {
  for (const Entry& e : other.entries_) Add(e.id, e.units);
}

int64_t ResourceRequest::Get(ResourceId id) const {
  for (const Entry& e : entries_) {
    if (e.id == id) return e.units;
    if (e.id > id) break;
  }
  return 0;
}

bool ResourceRequest::FitsWithin(const ResourceRequest& other) const {
  for (const Entry& e : entries_) {
    if (other.Get(e.id) < e.units) return false;
  }
  return true;
}

ResourceMap ResourceRequest::ToMap(const ResourceNames& names) const {
  ResourceMap out;
  for (const Entry& e : entries_) out[names.Name(e.id)] = ToAmount(e.units);
  return out;
}

std::string ResourceRequest::DebugString(const ResourceNames& names) const {
  std::string out = "{";
  for (size_t i = 0; i < entries_.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", names.Name(entries_[i].id), ": ",
                    FormatUnits(entries_[i].units));
  }
  return out + "}";
}

ResourceVector ResourceVector::FromRequest(const ResourceRequest& request) {
  ResourceVector out;
  for (const ResourceRequest::Entry& e : request.entries()) out.Set(e.id, e.units);
  return out;
}

void ResourceVector::Set(ResourceId id, int64_t units) {
  if (id >= static_cast<int>(units_.size())) {
    if (units == 0) return;
    units_.resize(id + 1, 0);
  }
  units_[id] = units;
}

void ResourceVector::Subtract(const ResourceRequest& request) {
  for (const ResourceRequest::Entry& e : request.entries()) Set(e.id, Get(e.id) - e.units);
}

void ResourceVector::Add(const ResourceRequest& request) {
  for (const ResourceRequest::Entry& e : request.entries()) Set(e.id, Get(e.id) + e.units);
}

ResourceMap ResourceVector::ToMap(const ResourceNames& names) const {
  ResourceMap out;
  for (int id = 0; id < size(); ++id) {
    if (units_[id] != 0) out[names.Name(id)] = ToAmount(units_[id]);
  }
  return out;
}

ResourceMap ResourceMapFromProto(const proto::Resources& resources) {
  return ResourceMap(resources.amounts().begin(), resources.amounts().end());
}

}  // namespace scheduler
}  // namespace troupe
