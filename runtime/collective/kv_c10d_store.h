// KvC10dStore: a c10d::Store (what ProcessGroupGloo rendezvous through) backed by a troupe
// KvStore, every key under a fixed prefix. This is how a collective group's Gloo members find
// each other through the cluster head's KV instead of a separate TCPStore server.
//
// Mapping: set = Put; get / wait = blocking Get bounded by the store's timeout (c10::Error on
// timeout, naming the key); check = non-blocking Get; deleteKey = Delete; getNumKeys = List.
// The KV has no atomic read-modify-write, so add and compareSet take a per-key lock (a
// put-if-absent key "<key>.__lock") for the read-modify-write; they are fine at rendezvous
// rates, not for hot counters. A holder that dies leaves its lock behind: later add /
// compareSet on that key time out naming the lock key.
//
// Errors are thrown as c10::Error, as c10d expects of a Store; callers at troupe boundaries
// catch them.
//
// Ownership: does not own `kv`, which must outlive the store.
// Thread-safety: thread-safe (each call is independent; KvStore is thread-safe).
#ifndef TROUPE_RUNTIME_COLLECTIVE_KV_C10D_STORE_H_
#define TROUPE_RUNTIME_COLLECTIVE_KV_C10D_STORE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/collective/kv_store.h"

namespace troupe::collective {

class KvC10dStore final : public c10d::Store {
 public:
  KvC10dStore(KvStore* kv, std::string prefix, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  // Returns the value now at `key` (see c10d::TCPStore): desired if swapped or created.
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  // Waits up to the store timeout for `key`.
  std::vector<uint8_t> get(const std::string& key) override;
  // Adds `value` to the decimal integer at `key` (absent = 0); returns the new value.
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::string Key(const std::string& key) const { return prefix_ + key; }
  // Runs `fn` holding the lock of `key` (throws c10::Error on timeout or KV errors).
  template <typename Fn>
  auto WithLock(const std::string& key, Fn fn);

  KvStore* const kv_;
  const std::string prefix_;
};

}  // namespace troupe::collective

#endif  // TROUPE_RUNTIME_COLLECTIVE_KV_C10D_STORE_H_
