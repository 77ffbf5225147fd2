// A thin RAII layer over one SQLite connection: open with WAL and a busy timeout,
// a cache of prepared statements, immediate write transactions, and the mapping
// of SQLite result codes to canonical absl::Status codes (with the file's path).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::tuningdb {

class SqliteConnection;

// A prepared statement borrowed from the connection's cache. Bind parameters are
// 1-based, columns 0-based (as in SQLite). The statement is reset and its bindings
// cleared when the handle goes away, so it can be reused by the next caller.
class SqliteStatement {
 public:
  SqliteStatement(sqlite3_stmt* stmt, const SqliteConnection* conn) : stmt_(stmt), conn_(conn) {}
  SqliteStatement(SqliteStatement&& other) noexcept : stmt_(other.stmt_), conn_(other.conn_) {
    other.stmt_ = nullptr;
  }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  SqliteStatement& operator=(SqliteStatement&&) = delete;
  ~SqliteStatement();

  SqliteStatement& Bind(int index, std::string_view text);
  SqliteStatement& Bind(int index, int64_t value);
  SqliteStatement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  SqliteStatement& Bind(int index, double value);
  SqliteStatement& BindBlob(int index, std::string_view bytes);
  SqliteStatement& BindNull(int index);

  // Steps once: true when a row is available, false when the statement is done.
  absl::StatusOr<bool> Step();
  // Steps until done (for statements that return no rows).
  absl::Status Run();

  int64_t ColumnInt(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  std::string ColumnBlob(int column) const;
  bool ColumnIsNull(int column) const;

 private:
  sqlite3_stmt* stmt_;
  const SqliteConnection* conn_;
};

class SqliteConnection {
 public:
  // Opens (creating if needed) `path`, switches it to WAL with synchronous=NORMAL
  // and sets a busy timeout so several processes can share the file. A file that
  // is not a SQLite database gives FAILED_PRECONDITION, a corrupt one DATA_LOSS.
  static absl::StatusOr<std::unique_ptr<SqliteConnection>> Open(const std::string& path,
                                                                int busy_timeout_ms);
  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  // A cached prepared statement for `sql` (one statement). Not thread-safe: the
  // owner serialises all use of the connection.
  absl::StatusOr<SqliteStatement> Prepare(const std::string& sql);
  // Runs one or more statements that return no rows.
  absl::Status Exec(const std::string& sql);

  // Status for a SQLite result code, naming the database file and what was tried.
  absl::Status Error(int rc, std::string_view what) const;

  const std::string& path() const { return path_; }
  sqlite3* raw() const { return db_; }

 private:
  SqliteConnection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

// BEGIN IMMEDIATE ... COMMIT. Taking the write lock up front means the busy
// timeout applies to the whole transaction (a deferred read-then-write
// transaction could fail with SQLITE_BUSY without waiting). Rolls back when
// destroyed without Commit().
class SqliteTransaction {
 public:
  static absl::StatusOr<SqliteTransaction> BeginImmediate(SqliteConnection& conn);
  SqliteTransaction(SqliteTransaction&& other) noexcept : conn_(other.conn_) { other.conn_ = nullptr; }
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(SqliteTransaction&&) = delete;
  ~SqliteTransaction();

  absl::Status Commit();

 private:
  explicit SqliteTransaction(SqliteConnection* conn) : conn_(conn) {}
  SqliteConnection* conn_;
};

}  // namespace kiln::tuningdb
