// SQLite connection, statement cache, transactions and error mapping.
#include "tuning_db/sqlite_connection.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kiln::tuningdb {

SqliteStatement::~SqliteStatement() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

SqliteStatement& SqliteStatement::Bind(int index, std::string_view text) {
  sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

SqliteStatement& SqliteStatement::BindBlob(int index, std::string_view bytes) {
  sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  return *this;
}

SqliteStatement& SqliteStatement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

absl::StatusOr<bool> SqliteStatement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string sql = sqlite3_sql(stmt_);
  if (sql.size() > 80) sql = sql.substr(0, 77) + "...";
  return conn_->Error(rc, absl::StrCat("running \"", sql, "\""));
}

absl::Status SqliteStatement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

int64_t SqliteStatement::ColumnInt(int column) const { return sqlite3_column_int64(stmt_, column); }

double SqliteStatement::ColumnDouble(int column) const { return sqlite3_column_double(stmt_, column); }

std::string SqliteStatement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column));
}

std::string SqliteStatement::ColumnBlob(int column) const {
  const void* bytes = sqlite3_column_blob(stmt_, column);
  if (bytes == nullptr) return "";
  return std::string(static_cast<const char*>(bytes), sqlite3_column_bytes(stmt_, column));
}

bool SqliteStatement::ColumnIsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

absl::StatusOr<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path,
                                                                         int busy_timeout_ms) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  // The connection owns `db` from here on, even when opening failed.
  std::unique_ptr<SqliteConnection> conn(new SqliteConnection(db, path));
  if (rc != SQLITE_OK) return conn->Error(rc, "opening");
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);

  // journal_mode is the first statement that reads the file, so a file that is
  // not a database fails here.
  // Switching a new file to WAL needs an exclusive lock and SQLite does not run
  // the busy handler for it, so retry here while another process holds the file.
  std::string mode;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
  auto backoff = std::chrono::milliseconds(5);
  while (true) {
    absl::StatusOr<SqliteStatement> wal = conn->Prepare("PRAGMA journal_mode=WAL");
    if (!wal.ok()) return wal.status();
    absl::StatusOr<bool> row = wal->Step();
    if (row.ok()) {
      mode = *row ? wal->ColumnText(0) : "";
      break;
    }
    int rc = sqlite3_extended_errcode(db) & 0xff;
    if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || std::chrono::steady_clock::now() >= deadline) {
      return row.status();
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
  if (mode != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("tuning db ", path, ": cannot switch to WAL journal mode (got \"", mode, "\")"));
  }
  // NORMAL in WAL mode: a commit survives a process crash; only a power loss
  // may roll back the last commits (never corrupts). A 64 MiB page cache (an
  // upper bound, allocated as used) keeps the record indexes of a database of
  // millions of records in memory while inserting.
  absl::Status s = conn->Exec("PRAGMA synchronous=NORMAL; PRAGMA cache_size=-65536");
  if (!s.ok()) return s;
  return conn;
}

SqliteConnection::~SqliteConnection() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

absl::StatusOr<SqliteStatement> SqliteConnection::Prepare(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) return SqliteStatement(it->second, this);
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()) + 1,
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Error(rc, absl::StrCat("preparing \"", sql, "\""));
  }
  statements_.emplace(sql, stmt);
  return SqliteStatement(stmt, this);
}

absl::Status SqliteConnection::Exec(const std::string& sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return absl::OkStatus();
  std::string detail = message != nullptr ? message : "";
  sqlite3_free(message);
  absl::Status status = Error(rc, "executing schema statement");
  return absl::Status(status.code(), absl::StrCat(status.message(), " [", detail, "]"));
}

absl::Status SqliteConnection::Error(int rc, std::string_view what) const {
  const char* sqlite_message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  std::string message = absl::StrCat("tuning db ", path_, ": ", std::string(what), ": ",
                                     sqlite_message, " (sqlite code ", rc, ")");
  // Why, where SQLite's words do not say: "unable to open database file" on
  // a read-only filesystem or without permission, "disk I/O error".
  if ((rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_READONLY) {
    const std::string folder = std::filesystem::path(path_).parent_path().string();
    if (access(path_.c_str(), W_OK) != 0 && errno != ENOENT) {
      absl::StrAppend(&message, ": the file is not writable: ", strerror(errno));
    } else if (access(folder.empty() ? "." : folder.c_str(), W_OK) != 0) {
      absl::StrAppend(&message, ": its folder is not writable: ", strerror(errno));
    }
  } else if ((rc & 0xff) == SQLITE_IOERR && db_ != nullptr && sqlite3_system_errno(db_) != 0) {
    absl::StrAppend(&message, ": ", strerror(sqlite3_system_errno(db_)));
  }
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
      return absl::FailedPreconditionError(
          absl::StrCat("tuning db ", path_, " is not a SQLite database: ", std::string(what), ": ",
                       sqlite_message, " (sqlite code ", rc, ")"));
    case SQLITE_CORRUPT:
      return absl::DataLossError(absl::StrCat("tuning db ", path_, " is corrupt: ", std::string(what),
                                              ": ", sqlite_message, " (sqlite code ", rc, ")"));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
      return absl::FailedPreconditionError(message);
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::PermissionDeniedError(message);
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::ResourceExhaustedError(message);
    case SQLITE_IOERR:
      return absl::UnavailableError(message);
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
    case SQLITE_RANGE:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<SqliteTransaction> SqliteTransaction::BeginImmediate(SqliteConnection& conn) {
  absl::StatusOr<SqliteStatement> begin = conn.Prepare("BEGIN IMMEDIATE");
  if (!begin.ok()) return begin.status();
  absl::Status s = begin->Run();
  if (!s.ok()) return s;
  return SqliteTransaction(&conn);
}

SqliteTransaction::~SqliteTransaction() {
  if (conn_ != nullptr && !sqlite3_get_autocommit(conn_->raw())) {
    absl::StatusOr<SqliteStatement> rollback = conn_->Prepare("ROLLBACK");
    if (rollback.ok()) (void)rollback->Run();
  }
}

absl::Status SqliteTransaction::Commit() {
  absl::StatusOr<SqliteStatement> commit = conn_->Prepare("COMMIT");
  if (!commit.ok()) return commit.status();
  absl::Status s = commit->Run();
  if (s.ok()) conn_ = nullptr;
  return s;
}

}  // namespace kiln::tuningdb
