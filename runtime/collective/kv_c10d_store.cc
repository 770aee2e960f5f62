#include "runtime/collective/kv_c10d_store.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace troupe::collective {
namespace {

constexpr char kLockSuffix[] = ".__lock";

std::string ToString(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> ToBytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

// c10d's kNoTimeout (zero) means "wait forever"; a day stands in for that.
absl::Duration ToDuration(std::chrono::milliseconds ms) {
  return ms.count() <= 0 ? absl::Hours(24) : absl::Milliseconds(ms.count());
}

[[noreturn]] void Throw(const std::string& what) { TORCH_CHECK(false, what); }

void ThrowIfError(const absl::Status& s, const std::string& context) {
  if (!s.ok()) Throw(absl::StrCat(context, ": ", s.ToString()));
}

}  // namespace

KvC10dStore::KvC10dStore(KvStore* kv, std::string prefix, std::chrono::milliseconds timeout)
    : c10d::Store(timeout), kv_(kv), prefix_(std::move(prefix)) {}

void KvC10dStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  ThrowIfError(kv_->Put(Key(key), ToString(value), /*if_absent=*/false),
               absl::StrCat("KV store set '", Key(key), "'"));
}

template <typename Fn>
auto KvC10dStore::WithLock(const std::string& key, Fn fn) {
  const std::string lock_key = Key(key) + kLockSuffix;
  const std::string owner = absl::StrCat(absl::Uniform<uint64_t>(absl::BitGen()));
  const absl::Time deadline = absl::Now() + ToDuration(timeout_);
  absl::Duration backoff = absl::Microseconds(200);
  while (true) {
    absl::Status s = kv_->Put(lock_key, owner, /*if_absent=*/true);
    if (s.ok()) break;
    if (!absl::IsAlreadyExists(s)) ThrowIfError(s, absl::StrCat("KV store lock '", lock_key, "'"));
    if (absl::Now() >= deadline) {
      Throw(absl::StrCat("KV store: lock '", lock_key, "' still held after ", timeout_.count(),
                         " ms (its holder may have died)"));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(20));
  }
  struct Unlock {
    KvStore* kv;
    const std::string& key;
    ~Unlock() { kv->Delete(key, /*prefix=*/false).IgnoreError(); }
  } unlock{kv_, lock_key};
  return fn();
}

std::vector<uint8_t> KvC10dStore::compareSet(const std::string& key,
                                             const std::vector<uint8_t>& expected,
                                             const std::vector<uint8_t>& desired) {
  return WithLock(key, [&]() -> std::vector<uint8_t> {
    absl::StatusOr<std::string> cur = kv_->Get(Key(key), absl::ZeroDuration());
    if (!cur.ok() && !absl::IsNotFound(cur.status())) {
      ThrowIfError(cur.status(), absl::StrCat("KV store compareSet '", Key(key), "'"));
    }
    const bool absent = !cur.ok();
    if ((absent && expected.empty()) || (!absent && *cur == ToString(expected))) {
      ThrowIfError(kv_->Put(Key(key), ToString(desired), /*if_absent=*/false),
                   absl::StrCat("KV store compareSet '", Key(key), "'"));
      return desired;
    }
    return absent ? expected : ToBytes(*cur);
  });
}

std::vector<uint8_t> KvC10dStore::get(const std::string& key) {
  absl::StatusOr<std::string> v = kv_->Get(Key(key), ToDuration(timeout_));
  if (absl::IsNotFound(v.status())) {
    Throw(absl::StrCat("KV store: key '", Key(key), "' not set within ", timeout_.count(), " ms"));
  }
  ThrowIfError(v.status(), absl::StrCat("KV store get '", Key(key), "'"));
  return ToBytes(*v);
}

int64_t KvC10dStore::add(const std::string& key, int64_t value) {
  return WithLock(key, [&]() -> int64_t {
    absl::StatusOr<std::string> cur = kv_->Get(Key(key), absl::ZeroDuration());
    int64_t base = 0;
    if (cur.ok()) {
      if (!absl::SimpleAtoi(*cur, &base)) {
        Throw(absl::StrCat("KV store add: '", Key(key), "' holds a non-integer value"));
      }
    } else if (!absl::IsNotFound(cur.status())) {
      ThrowIfError(cur.status(), absl::StrCat("KV store add '", Key(key), "'"));
    }
    const int64_t result = base + value;
    ThrowIfError(kv_->Put(Key(key), absl::StrCat(result), /*if_absent=*/false),
                 absl::StrCat("KV store add '", Key(key), "'"));
    return result;
  });
}

bool KvC10dStore::deleteKey(const std::string& key) {
  absl::StatusOr<int64_t> n = kv_->Delete(Key(key), /*prefix=*/false);
  ThrowIfError(n.status(), absl::StrCat("KV store delete '", Key(key), "'"));
  return *n > 0;
}

bool KvC10dStore::check(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    absl::StatusOr<std::string> v = kv_->Get(Key(key), absl::ZeroDuration());
    if (absl::IsNotFound(v.status())) return false;
    ThrowIfError(v.status(), absl::StrCat("KV store check '", Key(key), "'"));
  }
  return true;
}

int64_t KvC10dStore::getNumKeys() {
  absl::StatusOr<std::vector<std::string>> keys = kv_->List(prefix_);
  ThrowIfError(keys.status(), absl::StrCat("KV store list '", prefix_, "'"));
  return std::count_if(keys->begin(), keys->end(),
                       [](const std::string& k) { return !absl::EndsWith(k, kLockSuffix); });
}

void KvC10dStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void KvC10dStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  const absl::Time deadline = absl::Now() + ToDuration(timeout);
  for (const std::string& key : keys) {
    absl::StatusOr<std::string> v =
        kv_->Get(Key(key), std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (absl::IsNotFound(v.status())) {
      Throw(absl::StrCat("KV store: wait for key '", Key(key), "' timed out after ",
                         timeout.count(), " ms"));
    }
    ThrowIfError(v.status(), absl::StrCat("KV store wait '", Key(key), "'"));
  }
}

}  // namespace troupe::collective
