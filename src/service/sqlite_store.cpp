// The embedded store: one SQLite file in WAL mode.
//
// Durability: WAL, with synchronous=FULL (Durability::full, the default) or NORMAL. FULL fsyncs
// the WAL at every commit, so what a request acknowledged survives a power cut or kernel crash;
// it costs a disk flush per request (every request, even GET /jobs/batch_size, writes). NORMAL
// leaves a commit in the WAL file (the operating system's page cache) when it returns: a server
// killed with SIGKILL at any moment still loses nothing it acknowledged, but a power cut or
// kernel crash can lose the last few commits before the next checkpoint (never the database).
//
// Concurrency: one connection per store behind a mutex. SQLite runs one writer at a time, and
// every request writes, so more connections would only queue in SQLite's busy handler (which
// sleeps in steps of milliseconds) instead of on the mutex. Another process on the same file is
// kept out by BEGIN IMMEDIATE and waited for by busy_timeout.

#include <fmt/format.h>
#include <sqlite3.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "gpucap/core/error.hpp"
#include "gpucap/service/store.hpp"

namespace gpucap::service {
namespace {

constexpr int busy_timeout_ms = 5000;
constexpr const char* now_sql = "strftime('%Y-%m-%dT%H:%M:%fZ','now')";

// Another connection held the write lock longer than busy_timeout: the transaction is run again.
struct SqliteBusy : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The schema, one step per version; applied in order inside one transaction.
const std::vector<std::string>& migrations() {
  static const std::vector<std::string> steps = {
      // 1: jobs and their trials.
      "CREATE TABLE jobs ("
      "  job_id TEXT PRIMARY KEY,"
      "  spec TEXT NOT NULL,"     // bso::to_json(JobSpec)
      "  fields TEXT NOT NULL,"   // bso::job_fields_to_json: stage, min cost, arms, random state
      "  created_at TEXT NOT NULL,"
      "  updated_at TEXT NOT NULL);"
      "CREATE TABLE trials ("
      "  job_id TEXT NOT NULL REFERENCES jobs(job_id) ON DELETE CASCADE,"
      "  trial_number INTEGER NOT NULL,"
      "  batch_size INTEGER NOT NULL,"
      "  type TEXT NOT NULL,"
      "  status TEXT NOT NULL,"
      "  epochs INTEGER NOT NULL,"
      "  time_s REAL NOT NULL,"
      "  energy_j REAL NOT NULL,"
      "  last_epoch_time_s REAL NOT NULL,"
      "  last_epoch_energy_j REAL NOT NULL,"
      "  converged INTEGER,"  // NULL until the trial succeeded, then 0 or 1
      "  started_at TEXT NOT NULL,"
      "  ended_at TEXT,"
      "  PRIMARY KEY (job_id, trial_number)) WITHOUT ROWID;",
  };
  return steps;
}

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
      throw Error(ErrorCode::io, fmt::format("SQLite: {} (in {})", sqlite3_errmsg(db), sql));
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds the parameters in order (after a reset) and returns *this for step().
  template <typename... Args>
  Statement& with(const Args&... args) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    int index = 0;
    (bind(++index, args), ...);
    (void)index;
    return *this;
  }

  // True while there is a row.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(rc);
  }
  void run() {
    while (step()) {
    }
  }
  // Ends a read early (a statement left on a row keeps its read open).
  void done() { sqlite3_reset(stmt_); }

  [[nodiscard]] int integer(int column) const { return sqlite3_column_int(stmt_, column); }
  [[nodiscard]] double real(int column) const { return sqlite3_column_double(stmt_, column); }
  [[nodiscard]] bool is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  [[nodiscard]] std::string text(int column) const {
    const auto* p = sqlite3_column_text(stmt_, column);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
  }

 private:
  void bind(int index, int value) { check(sqlite3_bind_int(stmt_, index, value)); }
  void bind(int index, double value) { check(sqlite3_bind_double(stmt_, index, value)); }
  void bind(int index, const std::string& value) {
    check(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT));
  }
  void bind(int index, const char* value) {
    check(value == nullptr ? sqlite3_bind_null(stmt_, index) : sqlite3_bind_text(stmt_, index, value, -1, SQLITE_TRANSIENT));
  }
  void bind(int index, const std::optional<bool>& value) {
    check(value ? sqlite3_bind_int(stmt_, index, *value ? 1 : 0) : sqlite3_bind_null(stmt_, index));
  }
  void check(int rc) {
    if (rc != SQLITE_OK) fail(rc);
  }
  [[noreturn]] void fail(int rc) {
    sqlite3_reset(stmt_);
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) throw SqliteBusy(sqlite3_errmsg(db_));
    throw Error(ErrorCode::io, fmt::format("SQLite: {}", sqlite3_errmsg(db_)));
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

bso::Trial trial_from_row(const Statement& row) {
  bso::Trial trial;
  trial.trial_number = row.integer(0);
  trial.batch_size = row.integer(1);
  trial.type = bso::parse_trial_type(row.text(2));
  trial.status = bso::parse_trial_status(row.text(3));
  trial.epochs = row.integer(4);
  trial.time_s = row.real(5);
  trial.energy_j = row.real(6);
  trial.last_epoch_time_s = row.real(7);
  trial.last_epoch_energy_j = row.real(8);
  if (!row.is_null(9)) trial.converged = row.integer(9) != 0;
  return trial;
}

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, Durability durability) : path_(std::move(path)) {
    const int rc = sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      throw Error(ErrorCode::io, fmt::format("cannot open SQLite database {}: {}", path_, message));
    }
    try {
      sqlite3_busy_timeout(db_, busy_timeout_ms);
      exec("PRAGMA journal_mode=WAL");
      exec(durability == Durability::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
      exec("PRAGMA foreign_keys=ON");
      migrate();
      prepare();
    } catch (...) {
      statements_.reset();
      sqlite3_close(db_);
      throw;
    }
  }

  ~SqliteStore() override {
    statements_.reset();
    sqlite3_close(db_);
  }

  std::optional<bso::JobSpec> insert_job(const bso::JobState& job) override {
    return transaction<std::optional<bso::JobSpec>>(true, [&]() -> std::optional<bso::JobSpec> {
      auto& select = statements_->select_job.with(job.spec.job_id);
      if (select.step()) {
        const auto stored = select.text(0);
        select.done();
        return spec_from_text(stored);
      }
      statements_->insert_job.with(job.spec.job_id, spec_to_text(job.spec), fields_to_text(job)).run();
      for (const auto& trial : job.trials) insert_trial(job.spec.job_id, trial);
      return std::nullopt;
    });
  }

  bool update_job(const std::string& job_id, const std::function<void(bso::JobState&)>& operation) override {
    return transaction<bool>(true, [&] {
      auto before = load(job_id);
      if (!before) return false;
      auto after = *before;
      operation(after);
      const auto changes = diff_jobs(*before, after);
      if (changes.fields_changed) statements_->update_fields.with(fields_to_text(after), job_id).run();
      for (const auto* trial : changes.inserted) insert_trial(job_id, *trial);
      for (const auto* trial : changes.updated) update_trial(job_id, *trial);
      return true;
    });
  }

  bool delete_job(const std::string& job_id) override {
    return transaction<bool>(true, [&] {
      statements_->delete_job.with(job_id).run();
      return sqlite3_changes(db_) > 0;
    });
  }

  std::optional<bso::JobState> load_job(const std::string& job_id) override {
    return transaction<std::optional<bso::JobState>>(false, [&] { return load(job_id); });
  }

  std::vector<std::string> job_ids() override {
    return transaction<std::vector<std::string>>(false, [&] {
      std::vector<std::string> ids;
      auto& select = statements_->select_job_ids.with();
      while (select.step()) ids.push_back(select.text(0));
      return ids;
    });
  }

  int schema_version() override {
    return transaction<int>(false, [&] { return stored_schema_version(); });
  }

  std::string describe() const override { return fmt::format("SQLite {}", path_); }

  std::string durability_setting() override {
    const std::lock_guard lock(mutex_);
    Statement pragma(db_, "PRAGMA synchronous");
    pragma.with();
    if (!pragma.step()) throw Error(ErrorCode::io, fmt::format("SQLite {}: PRAGMA synchronous answered nothing", path_));
    switch (pragma.integer(0)) {
      case 0: return "synchronous=OFF";
      case 1: return "synchronous=NORMAL";
      case 2: return "synchronous=FULL";
      case 3: return "synchronous=EXTRA";
      default: return fmt::format("synchronous={}", pragma.integer(0));
    }
  }

 private:
  struct Statements {
    explicit Statements(sqlite3* db)
        : select_job(db, "SELECT spec, fields FROM jobs WHERE job_id = ?"),
          select_trials(db,
                        "SELECT trial_number, batch_size, type, status, epochs, time_s, energy_j, last_epoch_time_s,"
                        " last_epoch_energy_j, converged FROM trials WHERE job_id = ? ORDER BY trial_number"),
          select_job_ids(db, "SELECT job_id FROM jobs ORDER BY job_id"),
          insert_job(db, fmt::format("INSERT INTO jobs (job_id, spec, fields, created_at, updated_at)"
                                     " VALUES (?, ?, ?, {0}, {0})", now_sql)),
          update_fields(db, fmt::format("UPDATE jobs SET fields = ?, updated_at = {} WHERE job_id = ?", now_sql)),
          delete_job(db, "DELETE FROM jobs WHERE job_id = ?"),
          insert_trial(db, fmt::format("INSERT INTO trials (job_id, trial_number, batch_size, type, status, epochs, time_s,"
                                       " energy_j, last_epoch_time_s, last_epoch_energy_j, converged, started_at, ended_at)"
                                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {0},"
                                       " CASE WHEN ?5 = 'Dispatched' THEN NULL ELSE {0} END)", now_sql)),
          update_trial(db, fmt::format("UPDATE trials SET status = ?3, epochs = ?4, time_s = ?5, energy_j = ?6,"
                                       " last_epoch_time_s = ?7, last_epoch_energy_j = ?8, converged = ?9,"
                                       " ended_at = CASE WHEN ?3 = 'Dispatched' THEN NULL ELSE COALESCE(ended_at, {})"
                                       " END WHERE job_id = ?1 AND trial_number = ?2", now_sql)) {}
    Statement select_job, select_trials, select_job_ids, insert_job, update_fields, delete_job, insert_trial, update_trial;
  };

  void exec(const std::string& sql) {
    char* message = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message);
    if (rc == SQLITE_OK) return;
    const std::string text = message != nullptr ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) throw SqliteBusy(text);
    throw Error(ErrorCode::io, fmt::format("SQLite {}: {}", path_, text));
  }

  // Runs `body` in one transaction (IMMEDIATE: takes the write lock at once, so two writers never
  // both read and then conflict on commit), committing if it returns and rolling back if it
  // throws; a busy database is retried.
  template <typename Result, typename Body>
  Result transaction(bool write, const Body& body) {
    std::lock_guard lock(mutex_);
    for (int attempt = 1;; ++attempt) {
      try {
        exec(write ? "BEGIN IMMEDIATE" : "BEGIN");
      } catch (const SqliteBusy& e) {
        if (attempt >= max_transaction_attempts) throw busy_error(e);
        continue;
      }
      try {
        Result result = body();
        exec("COMMIT");
        return result;
      } catch (const SqliteBusy& e) {
        rollback();
        if (attempt >= max_transaction_attempts) throw busy_error(e);
        std::this_thread::sleep_for(std::chrono::milliseconds(attempt));
      } catch (...) {
        rollback();
        throw;
      }
    }
  }

  void rollback() noexcept {
    if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

  Error busy_error(const SqliteBusy& e) const {
    return Error(ErrorCode::io, fmt::format("SQLite {} stayed busy (another process holds it): {}", path_, e.what()));
  }

  int stored_schema_version() {
    Statement select(db_, "SELECT COALESCE(MAX(version), 0) FROM schema_version");
    select.with();
    return select.step() ? select.integer(0) : 0;
  }

  // Brings the schema to current_schema_version in one transaction; a second server starting on
  // the same file waits for the first (BEGIN IMMEDIATE) and then finds nothing to do.
  void migrate() {
    std::lock_guard lock(mutex_);
    exec("BEGIN IMMEDIATE");
    try {
      exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)");
      const int version = stored_schema_version();
      const int known = static_cast<int>(migrations().size());
      if (version > known) {
        throw Error(ErrorCode::invalid_data, fmt::format("SQLite {}: schema version {} is newer than this gpucap's ({})",
                                                         path_, version, known));
      }
      for (int v = version + 1; v <= known; ++v) {
        exec(migrations()[static_cast<std::size_t>(v - 1)]);
        exec(fmt::format("INSERT INTO schema_version (version, applied_at) VALUES ({}, {})", v, now_sql));
      }
      exec("COMMIT");
    } catch (...) {
      rollback();
      throw;
    }
  }

  void prepare() { statements_ = std::make_unique<Statements>(db_); }

  std::optional<bso::JobState> load(const std::string& job_id) {
    auto& select = statements_->select_job.with(job_id);
    if (!select.step()) return std::nullopt;
    const auto spec = select.text(0);
    const auto fields = select.text(1);
    select.done();
    auto job = job_from_text(spec, fields);
    auto& trials = statements_->select_trials.with(job_id);
    while (trials.step()) append_stored_trial(job, trial_from_row(trials));
    return job;
  }

  void insert_trial(const std::string& job_id, const bso::Trial& t) {
    statements_->insert_trial
        .with(job_id, t.trial_number, t.batch_size, std::string(bso::trial_type_name(t.type)),
              std::string(bso::trial_status_name(t.status)), t.epochs, t.time_s, t.energy_j, t.last_epoch_time_s,
              t.last_epoch_energy_j, t.converged)
        .run();
  }

  void update_trial(const std::string& job_id, const bso::Trial& t) {
    statements_->update_trial
        .with(job_id, t.trial_number, std::string(bso::trial_status_name(t.status)), t.epochs, t.time_s, t.energy_j,
              t.last_epoch_time_s, t.last_epoch_energy_j, t.converged)
        .run();
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  std::mutex mutex_;
  std::unique_ptr<Statements> statements_;
};

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const std::string& path, Durability durability) {
  return std::make_unique<SqliteStore>(path, durability);
}

}  // namespace gpucap::service
