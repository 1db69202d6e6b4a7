//! [`Store`]: one API over both backends. Each write is one transaction
//! under the store's write lock, keyed by the run's natural key, so two
//! writers at once lose nothing and double nothing, and a killed writer
//! leaves every run it had stored.

use std::time::Duration;

use importguard::recorder::CallSite;
use timeline::TrialRecord;

use crate::error::{Error, Result};
use crate::location::{Location, PasswordSources};
use crate::run::{Commit, Environment, ModuleTime, Run, RunKey, RunOutcome, StoredRun};
use crate::schema::{self, LATEST};
use crate::sql::{Dialect, Tx, Value, fail};

/// How long a SQLite writer waits for another's lock before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// The advisory lock key under which PostgreSQL migrations run (any
/// constant: it only has to be the same for every coldstart).
const PG_MIGRATION_LOCK: i64 = 0x636f_6c64_7374_6172;

/// An open history store.
pub struct Store {
    conn: Conn,
    location: Location,
}

enum Conn {
    Sqlite(rusqlite::Connection),
    Postgres(Box<postgres::Client>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// What [`Store::record`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The run was stored under this id.
    Stored(i64),
    /// A run of the same key was already stored (this id); nothing changed.
    Existing(i64),
    /// A run of the same key was stored without the trials, or without
    /// the import tree, that this one brings (a `check --record` run keeps
    /// an import tree and no trial, a `bench --record` run trials and no
    /// tree): what it lacked was added to it (this id), and nothing it
    /// held was changed.
    Completed(i64),
}

/// Which runs [`Store::runs`] reads; `None` matches any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// The target's name.
    pub target: Option<String>,
    /// The environment's fingerprint.
    pub environment: Option<String>,
    /// The commit's full object name.
    pub commit: Option<String>,
}

impl Store {
    /// Opens (or makes) the store at `location` and brings its schema to
    /// the newest version; a store of a newer schema is refused
    /// ([`Error::NewerSchema`]) and left as it is.
    pub fn open(location: &Location) -> Result<Store> {
        Store::open_at(location, LATEST, &PasswordSources::from_env())
    }

    /// [`Store::open`], migrating no further than `upto` (tests make an
    /// older store this way).
    pub(crate) fn open_at(
        location: &Location,
        upto: i64,
        passwords: &PasswordSources,
    ) -> Result<Store> {
        let conn = match location {
            Location::Sqlite(path) => Conn::Sqlite(open_sqlite(path, location)?),
            Location::Postgres(url) => {
                let config = url.config(passwords)?;
                let client = config
                    .connect(postgres::NoTls)
                    .map_err(|e| fail(location, "connect", e.to_string()))?;
                Conn::Postgres(Box::new(client))
            }
        };
        let mut store = Store {
            conn,
            location: location.clone(),
        };
        store.write("migrate its schema", |tx| {
            if tx.dialect() == Dialect::Postgres {
                tx.batch(&format!(
                    "SELECT pg_advisory_xact_lock({PG_MIGRATION_LOCK})"
                ))?;
            }
            schema::migrate(tx, upto)
        })?;
        Ok(store)
    }

    /// Where the store is.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Runs `f` in one transaction holding the store's write lock
    /// (SQLite's `BEGIN IMMEDIATE`), committed when it returns `Ok`.
    pub(crate) fn write<T>(
        &mut self,
        action: &'static str,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        let location = &self.location;
        let err = |e: String| fail(location, action, e);
        match &mut self.conn {
            Conn::Sqlite(c) => {
                let mut t = c
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(|e| err(e.to_string()))?;
                let out = f(&mut Tx {
                    sql: &mut t,
                    location,
                    action,
                })?;
                t.commit().map_err(|e| err(e.to_string()))?;
                Ok(out)
            }
            Conn::Postgres(c) => {
                let mut t = c.transaction().map_err(|e| err(e.to_string()))?;
                let out = f(&mut Tx {
                    sql: &mut t,
                    location,
                    action,
                })?;
                t.commit().map_err(|e| err(e.to_string()))?;
                Ok(out)
            }
        }
    }

    /// The store's schema version.
    pub fn schema_version(&mut self) -> Result<i64> {
        self.write("read its schema version", schema::version)
    }

    /// Whether a run of `key` is stored.
    pub fn contains(&mut self, key: &RunKey) -> Result<bool> {
        self.write("look up a run", |tx| Ok(run_id(tx, key)?.is_some()))
    }

    /// Stores `run` in one transaction, unless a run of its key is stored
    /// already.
    pub fn record(&mut self, run: &Run) -> Result<Written> {
        self.write("store a run", |tx| insert(tx, run))
    }

    /// The stored runs `filter` matches, by commit time then as stored,
    /// each with its trials and import tree.
    pub fn runs(&mut self, filter: &RunFilter) -> Result<Vec<StoredRun>> {
        self.write("read runs", |tx| select(tx, filter))
    }
}

fn open_sqlite(path: &std::path::Path, location: &Location) -> Result<rusqlite::Connection> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| Error::Folder {
        path: dir.to_path_buf(),
        source,
    })?;
    // Setting a new file's journal mode to WAL failed with "database is
    // locked", busy timeout notwithstanding, when two processes opened one
    // new store at once (two shards of a history run: 1 run in 4 of its
    // test here). An exclusive flock on the folder, held until the journal
    // mode is set, makes the openings take turns; it cannot touch SQLite's
    // own fcntl locks, and the migration after it waits as every write does
    // (BEGIN IMMEDIATE and the busy timeout). Where the folder cannot be
    // locked the opening goes on unserialised, as before.
    let _opening = std::fs::File::open(dir)
        .ok()
        .filter(|f| rustix::fs::flock(f, rustix::fs::FlockOperation::LockExclusive).is_ok());
    let err = |e: rusqlite::Error| fail(location, "open", e.to_string());
    let c = rusqlite::Connection::open(path).map_err(err)?;
    c.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
    c.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
    c.pragma_update(None, "foreign_keys", "ON").map_err(err)?;
    Ok(c)
}

/// A stored `u64` (counts and durations far below `i64::MAX`).
fn int(v: u64) -> Value {
    Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

fn run_id(tx: &mut Tx<'_>, key: &RunKey) -> Result<Option<i64>> {
    let rows = tx.query(
        "SELECT id FROM runs WHERE commit_sha = $1 AND target = $2 AND environment = $3",
        &[
            Value::Text(key.commit.clone()),
            Value::Text(key.target.clone()),
            Value::Text(key.environment.clone()),
        ],
    )?;
    Ok(rows.first().and_then(|r| r.first()).and_then(Value::int))
}

fn insert(tx: &mut Tx<'_>, run: &Run) -> Result<Written> {
    let env = &run.environment;
    let fingerprint = env.fingerprint();
    tx.execute(
        "INSERT INTO environments (fingerprint, interpreter, packages_hash, cpu_model, limits) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (fingerprint) DO NOTHING",
        &[
            Value::Text(fingerprint.clone()),
            Value::Text(env.interpreter.clone()),
            Value::Text(env.packages_hash.clone()),
            Value::Text(env.cpu_model.clone()),
            Value::Text(env.limits.clone()),
        ],
    )?;
    let (status, failure) = match &run.outcome {
        RunOutcome::Measured => ("measured", None),
        RunOutcome::Failed { message } => ("failed", Some(message.as_str())),
    };
    let c = &run.commit;
    let inserted = tx.query(
        "INSERT INTO runs (commit_sha, parent, branch, commit_unix_s, target, environment, \
         tool_version, recorded_unix_ms, status, failure) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         ON CONFLICT (commit_sha, target, environment) DO NOTHING RETURNING id",
        &[
            Value::Text(c.sha.clone()),
            Value::opt_text(c.parent.as_deref()),
            Value::opt_text(c.branch.as_deref()),
            Value::Int(c.time_unix_s),
            Value::Text(run.target.clone()),
            Value::Text(fingerprint),
            Value::Text(run.tool_version.clone()),
            Value::Int(run.recorded_unix_ms),
            Value::Text(status.to_owned()),
            Value::opt_text(failure),
        ],
    )?;
    let Some(id) = inserted
        .first()
        .and_then(|r| r.first())
        .and_then(Value::int)
    else {
        let id = run_id(tx, &run.key())?.unwrap_or_default();
        return complete(tx, id, run);
    };
    for (i, t) in run.trials.iter().enumerate() {
        insert_trial(tx, id, i, t)?;
    }
    insert_modules(tx, id, &run.modules)?;
    Ok(Written::Stored(id))
}

/// How many rows of `table` (`trials` or `modules`) belong to run `id`.
fn rows_of(tx: &mut Tx<'_>, table: &str, id: i64) -> Result<i64> {
    let rows = tx.query(
        &format!("SELECT COUNT(*) FROM {table} WHERE run_id = $1"),
        &[Value::Int(id)],
    )?;
    Ok(rows
        .first()
        .and_then(|r| r.first())
        .and_then(Value::int)
        .unwrap_or(0))
}

/// The stored run `id` of `run`'s key given what `run` brings and it
/// lacks: its trials when it has none, its import tree when it has none,
/// both only when both runs measured the commit (a failed run stays as it
/// was stored).
fn complete(tx: &mut Tx<'_>, id: i64, run: &Run) -> Result<Written> {
    if tx.dialect() == Dialect::Postgres {
        // Two writers completing the same run: the second waits, then
        // finds it complete.
        tx.query(
            "SELECT id FROM runs WHERE id = $1 FOR UPDATE",
            &[Value::Int(id)],
        )?;
    }
    let status = tx.query("SELECT status FROM runs WHERE id = $1", &[Value::Int(id)])?;
    let measured = |v: Option<&Value>| matches!(v, Some(Value::Text(s)) if s == "measured");
    if !measured(status.first().and_then(|r| r.first())) || run.outcome != RunOutcome::Measured {
        return Ok(Written::Existing(id));
    }
    let mut added = false;
    if !run.trials.is_empty() && rows_of(tx, "trials", id)? == 0 {
        for (i, t) in run.trials.iter().enumerate() {
            insert_trial(tx, id, i, t)?;
        }
        added = true;
    }
    if !run.modules.is_empty() && rows_of(tx, "modules", id)? == 0 {
        insert_modules(tx, id, &run.modules)?;
        added = true;
    }
    Ok(if added {
        Written::Completed(id)
    } else {
        Written::Existing(id)
    })
}

/// Run `id`'s import tree, in order.
fn insert_modules(tx: &mut Tx<'_>, id: i64, modules: &[ModuleTime]) -> Result<()> {
    for (i, m) in modules.iter().enumerate() {
        let at = m.imported_at.as_ref();
        tx.execute(
            "INSERT INTO modules (run_id, position, module, cumulative_us, self_us, \
             first_party, file, line, func) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                Value::Int(id),
                int(i as u64),
                Value::Text(m.module.clone()),
                int(m.cumulative_us),
                int(m.self_us),
                Value::Int(i64::from(m.first_party)),
                Value::opt_text(at.map(|a| a.file.as_str())),
                Value::opt_int(at.map(|a| i64::from(a.line))),
                Value::opt_text(at.map(|a| a.func.as_str())),
            ],
        )?;
    }
    Ok(())
}

/// The serde name of a value that serializes as a string or as a map
/// tagged `status` (a trial's kind, its outcome).
fn tag(v: &serde_json::Value) -> String {
    v.as_str()
        .or_else(|| v.get("status").and_then(|s| s.as_str()))
        .unwrap_or_default()
        .to_owned()
}

fn insert_trial(tx: &mut Tx<'_>, run_id: i64, i: usize, t: &TrialRecord) -> Result<()> {
    let json = serde_json::to_value(t).expect("a trial record serializes");
    tx.execute(
        "INSERT INTO trials (run_id, trial, kind, status, ready_ns, exit_ns, cpu_ns, \
         peak_rss_bytes, record) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            Value::Int(run_id),
            int(i as u64),
            Value::Text(tag(&json["kind"])),
            Value::Text(tag(&json["outcome"])),
            t.phases.ready_ns.map_or(Value::Null, int),
            t.phases.exit_ns.map_or(Value::Null, int),
            t.cpu_ns().map_or(Value::Null, |(u, s)| int(u + s)),
            t.max_rss_bytes().map_or(Value::Null, int),
            Value::Text(json.to_string()),
        ],
    )?;
    Ok(())
}

fn select(tx: &mut Tx<'_>, filter: &RunFilter) -> Result<Vec<StoredRun>> {
    let mut sql = "SELECT r.id, r.commit_sha, r.parent, r.branch, r.commit_unix_s, r.target, \
         r.tool_version, r.recorded_unix_ms, r.status, r.failure, e.interpreter, \
         e.packages_hash, e.cpu_model, e.limits \
         FROM runs r JOIN environments e ON e.fingerprint = r.environment WHERE 1 = 1"
        .to_owned();
    let mut params = Vec::new();
    for (column, value) in [
        ("r.target", &filter.target),
        ("r.environment", &filter.environment),
        ("r.commit_sha", &filter.commit),
    ] {
        if let Some(v) = value {
            params.push(Value::Text(v.clone()));
            sql.push_str(&format!(" AND {column} = ${}", params.len()));
        }
    }
    sql.push_str(" ORDER BY r.commit_unix_s, r.id");
    let rows = tx.query(&sql, &params)?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let r = Row(&row, tx.location().to_string());
        let id = r.int(0)?;
        let run = Run {
            commit: Commit {
                sha: r.text(1)?,
                parent: r.opt_text(2),
                branch: r.opt_text(3),
                time_unix_s: r.int(4)?,
            },
            target: r.text(5)?,
            tool_version: r.text(6)?,
            recorded_unix_ms: r.int(7)?,
            outcome: match (r.text(8)?.as_str(), r.opt_text(9)) {
                ("failed", message) => RunOutcome::Failed {
                    message: message.unwrap_or_default(),
                },
                _ => RunOutcome::Measured,
            },
            environment: Environment {
                interpreter: r.text(10)?,
                packages_hash: r.text(11)?,
                cpu_model: r.text(12)?,
                limits: r.text(13)?,
            },
            trials: trials_of(tx, id)?,
            modules: modules_of(tx, id)?,
        };
        out.push(StoredRun { id, run });
    }
    Ok(out)
}

/// One row read back, its columns checked.
struct Row<'a>(&'a [Value], String);

impl Row<'_> {
    fn corrupt(&self, i: usize, wanted: &str) -> Error {
        Error::Corrupt {
            location: self.1.clone(),
            what: format!("column {i}"),
            message: format!("expected {wanted}, found {:?}", self.0.get(i)),
        }
    }

    fn int(&self, i: usize) -> Result<i64> {
        self.0
            .get(i)
            .and_then(Value::int)
            .ok_or_else(|| self.corrupt(i, "an integer"))
    }

    fn text(&self, i: usize) -> Result<String> {
        self.opt_text(i).ok_or_else(|| self.corrupt(i, "a text"))
    }

    fn opt_text(&self, i: usize) -> Option<String> {
        self.0.get(i).and_then(Value::text).map(str::to_owned)
    }
}

fn trials_of(tx: &mut Tx<'_>, run_id: i64) -> Result<Vec<TrialRecord>> {
    let rows = tx.query(
        "SELECT record FROM trials WHERE run_id = $1 ORDER BY trial",
        &[Value::Int(run_id)],
    )?;
    rows.iter()
        .map(|row| {
            let r = Row(row, tx.location().to_string());
            serde_json::from_str(&r.text(0)?).map_err(|e| Error::Corrupt {
                location: r.1.clone(),
                what: format!("a trial of run {run_id}"),
                message: e.to_string(),
            })
        })
        .collect()
}

fn modules_of(tx: &mut Tx<'_>, run_id: i64) -> Result<Vec<ModuleTime>> {
    let rows = tx.query(
        "SELECT module, cumulative_us, self_us, first_party, file, line, func FROM modules \
         WHERE run_id = $1 ORDER BY position",
        &[Value::Int(run_id)],
    )?;
    rows.iter()
        .map(|row| {
            let r = Row(row, tx.location().to_string());
            let imported_at = match (r.opt_text(4), row.get(5).and_then(Value::int)) {
                (Some(file), Some(line)) => Some(CallSite {
                    file,
                    line: u32::try_from(line).unwrap_or_default(),
                    func: r.opt_text(6).unwrap_or_default(),
                }),
                _ => None,
            };
            Ok(ModuleTime {
                module: r.text(0)?,
                cumulative_us: r.int(1)?.max(0) as u64,
                self_us: r.int(2)?.max(0) as u64,
                first_party: r.int(3)? != 0,
                imported_at,
            })
        })
        .collect()
}
