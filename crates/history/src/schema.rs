//! The schema and its ordered migrations. A store records each migration
//! it has had in `schema_version`; opening it applies the missing ones in
//! order, in one transaction under the store's write lock, and refuses a
//! store whose version is newer than [`LATEST`] ([`crate::Error::NewerSchema`])
//! without touching it. A migration, once released, is never edited: a
//! change is a new one.

use crate::error::{Error, Result};
use crate::sql::{Dialect, Tx, Value};

/// One step of the schema, in the common SQL of both backends (`{id}`:
/// the dialect's auto-incremented key column).
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its version: 1, 2, ... in order.
    pub version: i64,
    /// What it changes, for a person.
    pub what: &'static str,
    /// Its statements.
    pub sql: &'static str,
}

/// Every migration, oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        what: "environments, runs and their raw trials",
        sql: "
CREATE TABLE environments (
    fingerprint TEXT PRIMARY KEY,
    interpreter TEXT NOT NULL,
    packages_hash TEXT NOT NULL,
    cpu_model TEXT NOT NULL,
    limits TEXT NOT NULL
);
CREATE TABLE runs (
    id {id},
    commit_sha TEXT NOT NULL,
    parent TEXT,
    branch TEXT,
    commit_unix_s BIGINT NOT NULL,
    target TEXT NOT NULL,
    environment TEXT NOT NULL REFERENCES environments (fingerprint),
    tool_version TEXT NOT NULL,
    recorded_unix_ms BIGINT NOT NULL,
    status TEXT NOT NULL,
    failure TEXT,
    UNIQUE (commit_sha, target, environment)
);
CREATE TABLE trials (
    run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    trial BIGINT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    ready_ns BIGINT,
    exit_ns BIGINT,
    cpu_ns BIGINT,
    peak_rss_bytes BIGINT,
    record TEXT NOT NULL,
    PRIMARY KEY (run_id, trial)
);
",
    },
    Migration {
        version: 2,
        what: "each run's start-up import tree, and the series index",
        sql: "
CREATE TABLE modules (
    run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    module TEXT NOT NULL,
    cumulative_us BIGINT NOT NULL,
    self_us BIGINT NOT NULL,
    first_party BIGINT NOT NULL,
    file TEXT,
    line BIGINT,
    func TEXT,
    PRIMARY KEY (run_id, position)
);
CREATE INDEX runs_by_series ON runs (target, environment, commit_unix_s);
",
    },
];

/// The newest schema version this build knows.
pub const LATEST: i64 = MIGRATIONS[MIGRATIONS.len() - 1].version;

/// Brings the store to version `upto` inside the caller's transaction
/// (which holds the write lock), or refuses a newer one. Returns the
/// version it found.
pub(crate) fn migrate(tx: &mut Tx<'_>, upto: i64) -> Result<i64> {
    tx.batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
            version BIGINT NOT NULL PRIMARY KEY,
            applied_unix_ms BIGINT NOT NULL
        )",
    )?;
    let found = version(tx)?;
    if found > LATEST {
        return Err(Error::NewerSchema {
            location: tx.location().to_string(),
            found,
            known: LATEST,
        });
    }
    for m in MIGRATIONS
        .iter()
        .filter(|m| m.version > found && m.version <= upto)
    {
        tx.batch(&expand(m.sql, tx.dialect()))?;
        tx.execute(
            "INSERT INTO schema_version (version, applied_unix_ms) VALUES ($1, $2)",
            &[Value::Int(m.version), Value::Int(now_ms())],
        )?;
    }
    Ok(found)
}

/// The store's schema version (0: empty).
pub(crate) fn version(tx: &mut Tx<'_>) -> Result<i64> {
    let rows = tx.query("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])?;
    Ok(rows
        .first()
        .and_then(|r| r.first())
        .and_then(Value::int)
        .unwrap_or(0))
}

/// A migration's statements in `dialect`.
fn expand(sql: &str, dialect: Dialect) -> String {
    let id = match dialect {
        Dialect::Sqlite => "INTEGER PRIMARY KEY AUTOINCREMENT",
        Dialect::Postgres => "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    };
    sql.replace("{id}", id)
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
