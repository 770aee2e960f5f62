#include "runtime/cluster/state_store.h"

#include <sqlite3.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace troupe {
namespace {

// Prepared statement that finalizes itself.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() const { return stmt_; }
  void Bind(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

std::string Column(sqlite3_stmt* st, int i) {
  const void* p = sqlite3_column_blob(st, i);
  const int n = sqlite3_column_bytes(st, i);
  return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
}

}  // namespace

absl::StatusOr<std::unique_ptr<StateStore>> StateStore::Open(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("state store: cannot create directory ", parent.string(), ": ", ec.message()));
  }
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("state store ", path, ": cannot open: ", msg));
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<StateStore> store(new StateStore(path, db));
  absl::MutexLock lock(&store->mu_);
  for (const char* sql : {"PRAGMA journal_mode=WAL;", "PRAGMA synchronous=NORMAL;",
                          "CREATE TABLE IF NOT EXISTS kv (tbl TEXT NOT NULL, key BLOB NOT NULL, "
                          "value BLOB NOT NULL, PRIMARY KEY (tbl, key));",
                          "PRAGMA quick_check;"}) {
    absl::Status s = store->Exec(sql);
    if (!s.ok()) {
      return absl::DataLossError(absl::StrCat("state store ", path,
                                              " is not a usable SQLite database (", s.message(),
                                              "); move it away to start with empty state"));
    }
  }
  return store;
}

StateStore::~StateStore() {
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::Status StateStore::Error(const char* what) const {
  return absl::InternalError(
      absl::StrCat("state store ", path_, ": ", what, ": ", sqlite3_errmsg(db_)));
}

absl::Status StateStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err != nullptr ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(msg);
  }
  return absl::OkStatus();
}

absl::Status StateStore::ApplyLocked(const Write& w) {
  if (w.value.has_value()) {
    Statement st(db_, "INSERT OR REPLACE INTO kv (tbl, key, value) VALUES (?1, ?2, ?3);");
    if (!st.ok()) return Error("prepare put");
    sqlite3_bind_text(st.get(), 1, w.table.c_str(), -1, SQLITE_TRANSIENT);
    st.Bind(2, w.key);
    st.Bind(3, *w.value);
    if (sqlite3_step(st.get()) != SQLITE_DONE) return Error("put");
  } else {
    Statement st(db_, "DELETE FROM kv WHERE tbl = ?1 AND key = ?2;");
    if (!st.ok()) return Error("prepare delete");
    sqlite3_bind_text(st.get(), 1, w.table.c_str(), -1, SQLITE_TRANSIENT);
    st.Bind(2, w.key);
    if (sqlite3_step(st.get()) != SQLITE_DONE) return Error("delete");
  }
  return absl::OkStatus();
}

absl::Status StateStore::Put(const std::string& table, const std::string& key,
                             const std::string& value) {
  absl::MutexLock lock(&mu_);
  return ApplyLocked(Write{table, key, value});
}

absl::Status StateStore::Delete(const std::string& table, const std::string& key) {
  absl::MutexLock lock(&mu_);
  return ApplyLocked(Write{table, key, std::nullopt});
}

absl::StatusOr<std::string> StateStore::Get(const std::string& table,
                                            const std::string& key) const {
  absl::MutexLock lock(&mu_);
  Statement st(db_, "SELECT value FROM kv WHERE tbl = ?1 AND key = ?2;");
  if (!st.ok()) return Error("prepare get");
  sqlite3_bind_text(st.get(), 1, table.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_blob(st.get(), 2, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
  const int rc = sqlite3_step(st.get());
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat(table, "/", key, " not found"));
  if (rc != SQLITE_ROW) return Error("get");
  return Column(st.get(), 0);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> StateStore::Scan(
    const std::string& table) const {
  absl::MutexLock lock(&mu_);
  Statement st(db_, "SELECT key, value FROM kv WHERE tbl = ?1 ORDER BY key;");
  if (!st.ok()) return Error("prepare scan");
  sqlite3_bind_text(st.get(), 1, table.c_str(), -1, SQLITE_TRANSIENT);
  std::vector<std::pair<std::string, std::string>> rows;
  int rc;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
    rows.emplace_back(Column(st.get(), 0), Column(st.get(), 1));
  }
  if (rc != SQLITE_DONE) return Error("scan");
  return rows;
}

absl::Status StateStore::Apply(const std::vector<Write>& writes) {
  absl::MutexLock lock(&mu_);
  absl::Status s = Exec("BEGIN IMMEDIATE;");
  if (!s.ok())
    return absl::InternalError(absl::StrCat("state store ", path_, ": begin: ", s.message()));
  for (const Write& w : writes) {
    s = ApplyLocked(w);
    if (!s.ok()) {
      (void)Exec("ROLLBACK;");
      return s;
    }
  }
  s = Exec("COMMIT;");
  if (!s.ok()) {
    (void)Exec("ROLLBACK;");
    return absl::InternalError(absl::StrCat("state store ", path_, ": commit: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace troupe
