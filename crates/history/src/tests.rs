//! The store's tests: one set of scenarios, each run on SQLite and on a
//! real PostgreSQL server ([`crate::testpg`]), whose answers must be the
//! same on both.

use std::path::Path;

use importguard::recorder::CallSite;
use proptest::prelude::*;
use timeline::{
    Escalation, ExitStatus, Marks, Outcome, RoundTrip, Stage, TrialKind, TrialRecord, Usage,
    Variant, WorkerRecord,
};

use crate::location::{Location, PasswordSources, PgUrl};
use crate::schema::LATEST;
use crate::testpg::{self, PgServer};
use crate::{
    Commit, Environment, Error, ModuleTime, Run, RunFilter, RunOutcome, Store, StoredRun, Written,
};

/// One trial of one worker, shaped as the bench records it: ready after
/// `ready_ms`, `cpu_ms` of CPU, a failure at start-up when `!ok`.
fn trial(i: usize, ready_ms: u64, cpu_ms: u64, ok: bool) -> TrialRecord {
    let t0 = 1_000_000_000 + i as u64 * 10_000_000_000;
    let ms = 1_000_000;
    let outcome = if ok {
        Outcome::Correct
    } else {
        Outcome::Failed {
            stage: Stage::Startup,
            message: "exited with code 1 before its ready line: ModuleNotFoundError".to_owned(),
        }
    };
    let marks = Marks {
        spawned_ns: t0,
        ready_read_ns: ok.then_some(t0 + ready_ms * ms),
        ready_t_ns: ok.then_some(t0 + ready_ms * ms - 20_000),
        health: if ok {
            vec![RoundTrip {
                sent_ns: t0 + (ready_ms + 1) * ms,
                received_ns: t0 + (ready_ms + 2) * ms,
            }]
        } else {
            Vec::new()
        },
        shutdown_sent_ns: ok.then_some(t0 + (ready_ms + 3) * ms),
        ack_read_ns: ok.then_some(t0 + (ready_ms + 4) * ms),
        exited_ns: Some(t0 + (ready_ms + 9) * ms),
        ..Marks::default()
    };
    let worker = WorkerRecord {
        pid: Some(4000 + i as u32),
        marks,
        usage: Some(Usage {
            user_ns: cpu_ms * ms * 3 / 4,
            sys_ns: cpu_ms * ms / 4,
            max_rss_bytes: 40_000_000 + ready_ms * 1000,
        }),
        rss_at_ready_bytes: ok.then_some(38_000_000),
        cgroup_peak_bytes: None,
        exit: Some(ExitStatus::Code(if ok { 0 } else { 1 })),
        escalation: Escalation::None,
        noise_lines: 0,
        outcome,
    };
    let kind = if i == 0 {
        TrialKind::Warmup
    } else {
        TrialKind::Measured
    };
    TrialRecord::new(
        i,
        i,
        kind,
        Variant::A,
        1_767_323_045_000 + i as u64,
        t0,
        vec![worker],
    )
}

fn environment(cpu: &str) -> Environment {
    Environment {
        interpreter: "cpython 3.12.3 (GIL) /usr/bin/python3".to_owned(),
        packages_hash: crate::content_hash(["numpy==2.1.0", "torch==2.5.1"]),
        cpu_model: cpu.to_owned(),
        limits: "none".to_owned(),
    }
}

fn modules(slow: u64) -> Vec<ModuleTime> {
    vec![
        ModuleTime {
            module: "app".to_owned(),
            cumulative_us: 900 + slow,
            self_us: 120,
            first_party: true,
            imported_at: None,
        },
        ModuleTime {
            module: "torch".to_owned(),
            cumulative_us: slow,
            self_us: slow / 3,
            first_party: false,
            imported_at: Some(CallSite {
                file: "src/app/models.py".to_owned(),
                line: 7,
                func: "<module>".to_owned(),
            }),
        },
    ]
}

/// A run of commit `n` (time order) of `target` in `env`.
fn run(n: i64, target: &str, env: Environment, failed: bool) -> Run {
    Run {
        commit: Commit {
            sha: format!("{n:040x}"),
            parent: (n > 1).then(|| format!("{:040x}", n - 1)),
            branch: Some("main".to_owned()),
            time_unix_s: 1_767_000_000 + n * 60,
        },
        target: target.to_owned(),
        tool_version: "0.1.0".to_owned(),
        environment: env,
        recorded_unix_ms: 1_767_323_045_000 + n,
        outcome: if failed {
            RunOutcome::Failed {
                message: "the worker did not start: ModuleNotFoundError: No module named 'app'"
                    .to_owned(),
            }
        } else {
            RunOutcome::Measured
        },
        trials: (0..4)
            .map(|i| trial(i, 200 + n as u64 * 10 + i as u64, 150 + i as u64, !failed))
            .collect(),
        modules: if failed {
            Vec::new()
        } else {
            modules(n as u64 * 100_000)
        },
    }
}

/// Three commits in one environment, the second again in another where
/// it could not be measured, and a second target.
fn sample() -> Vec<Run> {
    vec![
        run(1, "worker", environment("Xeon A"), false),
        run(2, "worker", environment("Xeon A"), false),
        run(3, "worker", environment("Xeon A"), false),
        run(2, "worker", environment("Epyc B"), true),
        run(3, "daemon", environment("Xeon A"), false),
    ]
}

/// What a scenario saw, compared between the backends.
type Answers = Vec<String>;

fn shown(runs: &[StoredRun]) -> Vec<String> {
    runs.iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r.id,
                r.run.key().commit,
                serde_json::to_string(&r.run).unwrap()
            )
        })
        .collect()
}

/// Every run stored, stored again (nothing changes), looked up and read
/// back whole.
fn round_trip(loc: &Location) -> Answers {
    let mut store = Store::open(loc).unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST);
    let runs = sample();
    let first: Vec<Written> = runs.iter().map(|r| store.record(r).unwrap()).collect();
    assert_eq!(
        first,
        (1..=5).map(Written::Stored).collect::<Vec<_>>(),
        "each run stored once, in order"
    );
    let again: Vec<Written> = runs.iter().map(|r| store.record(r).unwrap()).collect();
    assert_eq!(again, (1..=5).map(Written::Existing).collect::<Vec<_>>());
    assert!(runs.iter().all(|r| store.contains(&r.key()).unwrap()));
    let other = run(4, "worker", environment("Xeon A"), false);
    assert!(!store.contains(&other.key()).unwrap());

    let all = store.runs(&RunFilter::default()).unwrap();
    let mut expected = runs.clone();
    expected.sort_by_key(|r| r.commit.time_unix_s);
    assert_eq!(
        all.iter().map(|r| r.run.clone()).collect::<Vec<_>>(),
        expected,
        "every run reads back as it was written, by commit time"
    );
    let series = store
        .runs(&RunFilter {
            target: Some("worker".to_owned()),
            environment: Some(environment("Xeon A").fingerprint()),
            commit: None,
        })
        .unwrap();
    assert_eq!(series.len(), 3, "one series: one target, one environment");
    let mut out = shown(&all);
    out.extend(shown(&series));
    out
}

/// A store made at schema 1 (no import trees) holding a run, opened by
/// this build: migrated to the newest version, the run kept.
fn migration(loc: &Location) -> Answers {
    let mut old = Store::open_at(loc, 1, &PasswordSources::default()).unwrap();
    assert_eq!(old.schema_version().unwrap(), 1);
    let mut first = run(1, "worker", environment("Xeon A"), false);
    first.modules.clear();
    assert_eq!(old.record(&first).unwrap(), Written::Stored(1));
    drop(old);

    let mut store = Store::open(loc).unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST);
    let second = run(2, "worker", environment("Xeon A"), false);
    assert_eq!(store.record(&second).unwrap(), Written::Stored(2));
    let all = store.runs(&RunFilter::default()).unwrap();
    assert_eq!(
        all.iter().map(|r| r.run.clone()).collect::<Vec<_>>(),
        vec![first, second]
    );
    shown(&all)
}

/// A store whose schema is newer than this build's: refused with the
/// typed error, and left as it was.
fn newer_schema(loc: &Location) -> Answers {
    let mut store = Store::open(loc).unwrap();
    store.record(&sample()[0]).unwrap();
    store
        .write("test", |tx| {
            tx.execute(
                "INSERT INTO schema_version (version, applied_unix_ms) VALUES ($1, 0)",
                &[crate::sql::Value::Int(LATEST + 1)],
            )
        })
        .unwrap();
    drop(store);
    let err = Store::open(loc).unwrap_err();
    assert!(
        matches!(err, Error::NewerSchema { found, known, .. } if found == LATEST + 1 && known == LATEST),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("left untouched"), "{text}");
    // Untouched: refused again for the same version, which a store
    // rewritten (or migrated down) would not be.
    let again = Store::open(loc).unwrap_err();
    assert!(
        matches!(again, Error::NewerSchema { found, .. } if found == LATEST + 1),
        "{again:?}"
    );
    vec![text.replace(&loc.to_string(), "<store>")]
}

/// Two writers at once, each storing the same twelve runs in its own
/// order: every run stored exactly once, nothing doubled.
fn two_writers(loc: &Location) -> Answers {
    Store::open(loc).unwrap();
    let runs: Vec<Run> = (1..=12)
        .map(|n| run(n, "worker", environment("Xeon A"), n % 5 == 0))
        .collect();
    let results: Vec<Vec<Written>> = std::thread::scope(|s| {
        let handles: Vec<_> = [false, true]
            .into_iter()
            .map(|reversed| {
                let runs = &runs;
                s.spawn(move || {
                    let mut store = Store::open(loc).unwrap();
                    let order: Vec<&Run> = if reversed {
                        runs.iter().rev().collect()
                    } else {
                        runs.iter().collect()
                    };
                    order
                        .into_iter()
                        .map(|r| store.record(r).unwrap())
                        .collect::<Vec<Written>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let stored = results
        .iter()
        .flatten()
        .filter(|w| matches!(w, Written::Stored(_)))
        .count();
    assert_eq!(
        stored, 12,
        "each run stored by exactly one writer: {results:?}"
    );
    let all = Store::open(loc)
        .unwrap()
        .runs(&RunFilter::default())
        .unwrap();
    let read: Vec<Run> = all.into_iter().map(|r| r.run).collect();
    assert_eq!(read, runs, "nothing lost, nothing doubled");
    read.iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect()
}

type Scenario = fn(&Location) -> Answers;

/// A run stored with its import tree and no trial (`check --record`) is
/// completed by one with trials and no tree (`bench --record`), and the
/// other way round; a complete run, a failed one, or a failed newcomer
/// changes nothing.
fn completion(loc: &Location) -> Answers {
    let mut store = Store::open(loc).unwrap();
    // PostgreSQL's ids skip the values a conflict took: compare the kind
    // of each answer and that it names the first write's run.
    let mut record = |r: &Run| match store.record(r).unwrap() {
        Written::Stored(id) => ("stored", id),
        Written::Existing(id) => ("existing", id),
        Written::Completed(id) => ("completed", id),
    };
    let full = run(1, "worker", environment("Xeon A"), false);
    let tree_only = Run {
        trials: Vec::new(),
        ..full.clone()
    };
    let trials_only = Run {
        modules: Vec::new(),
        ..full.clone()
    };
    let (_, a) = record(&tree_only);
    assert_eq!(record(&tree_only), ("existing", a));
    assert_eq!(record(&trials_only), ("completed", a));
    assert_eq!(record(&full), ("existing", a));
    let other = run(2, "worker", environment("Xeon A"), false);
    let (kind, b) = record(&Run {
        modules: Vec::new(),
        ..other.clone()
    });
    assert_eq!(kind, "stored");
    let failed = Run {
        outcome: RunOutcome::Failed {
            message: "it did not start".to_owned(),
        },
        trials: Vec::new(),
        ..other.clone()
    };
    assert_eq!(record(&failed), ("existing", b));
    let tree = Run {
        trials: Vec::new(),
        ..other.clone()
    };
    assert_eq!(record(&tree), ("completed", b));
    let all = store.runs(&RunFilter::default()).unwrap();
    let runs: Vec<&Run> = all.iter().map(|r| &r.run).collect();
    assert_eq!(runs, [&full, &other], "each run whole once completed");
    all.iter()
        .map(|r| serde_json::to_string(&r.run).unwrap())
        .collect()
}

const SCENARIOS: &[(&str, Scenario)] = &[
    ("round_trip", round_trip),
    ("completion", completion),
    ("migration", migration),
    ("newer_schema", newer_schema),
    ("two_writers", two_writers),
];

fn sqlite(dir: &Path, name: &str) -> Location {
    Location::Sqlite(dir.join(name).join("history.db"))
}

#[test]
fn sqlite_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    round_trip(&sqlite(dir.path(), "h"));
}

#[test]
fn sqlite_migrates_an_older_store_and_keeps_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    migration(&sqlite(dir.path(), "h"));
}

#[test]
fn sqlite_refuses_a_newer_schema_and_leaves_it() {
    let dir = tempfile::tempdir().unwrap();
    newer_schema(&sqlite(dir.path(), "h"));
}

#[test]
fn sqlite_two_writers_at_once_lose_and_double_nothing() {
    let dir = tempfile::tempdir().unwrap();
    two_writers(&sqlite(dir.path(), "h"));
}

#[test]
fn postgres_gives_the_same_answers_as_sqlite() {
    let Some(server) = PgServer::start("postgres_gives_the_same_answers_as_sqlite") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, scenario) in SCENARIOS {
        let on_sqlite = scenario(&sqlite(dir.path(), name));
        let on_postgres = scenario(&server.database(name));
        assert_eq!(on_sqlite, on_postgres, "{name}: the backends disagree");
    }
}

/// Every text a store holds, table by table.
fn every_stored_text(store: &mut Store) -> String {
    let mut all = String::new();
    for table in [
        "schema_version",
        "environments",
        "runs",
        "trials",
        "modules",
    ] {
        let rows = store
            .write("test", |tx| {
                tx.query(&format!("SELECT * FROM {table}"), &[])
            })
            .unwrap();
        all.push_str(&format!("{rows:?}\n"));
    }
    all
}

#[test]
fn a_postgres_password_reaches_no_output_error_or_row() {
    let case = "a_postgres_password_reaches_no_output_error_or_row";
    let Some(server) = PgServer::start(case) else {
        return;
    };
    let loc = server.database("secret");
    let mut store = Store::open(&loc).unwrap();
    for r in sample() {
        store.record(&r).unwrap();
    }
    let shown = format!("{loc} {loc:?} {store:?}");
    assert!(shown.contains("coldstart:***@"), "{shown}");
    let rows = every_stored_text(&mut store);
    assert!(rows.contains("Xeon A"), "the dump reads the rows: {rows}");
    for text in [&shown, &rows] {
        assert!(!text.contains(testpg::PASSWORD), "{text}");
    }

    // A wrong password, an unknown database: errors that name the store.
    let port = server.port();
    for url in [
        format!(
            "postgres://coldstart:{}x@127.0.0.1:{port}/secret",
            testpg::PASSWORD
        ),
        format!(
            "postgres://coldstart:{}@127.0.0.1:{port}/nosuchdb",
            testpg::PASSWORD
        ),
    ] {
        let loc = Location::Postgres(PgUrl::parse(&url).unwrap());
        let err = Store::open(&loc).unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(text.contains("coldstart:***@127.0.0.1"), "{text}");
        assert!(!text.contains(testpg::PASSWORD), "{text}");
    }

    // No password in the URL: none from the environment fails; the
    // password file's matching line is used, as libpq uses it.
    let bare = Location::Postgres(PgUrl::parse(&server.url_without_password()).unwrap());
    let none = Store::open_at(&bare, LATEST, &PasswordSources::default()).unwrap_err();
    assert!(matches!(none, Error::Database { .. }), "{none:?}");
    let passfile = server.dir().join("pgpass");
    std::fs::write(
        &passfile,
        format!(
            "elsewhere:*:*:*:wrong\n127.0.0.1:{port}:*:coldstart:{}\n",
            testpg::PASSWORD
        ),
    )
    .unwrap();
    let sources = PasswordSources {
        pgpassword: None,
        passfile: Some(passfile),
    };
    let mut store = Store::open_at(&bare, LATEST, &sources).unwrap();
    assert_eq!(store.schema_version().unwrap(), LATEST);
}

fn arb_run() -> impl Strategy<Value = Run> {
    let text = "[a-zA-Z0-9 '\"\\\\%_ä€-]{0,24}";
    (
        (text, proptest::option::of(text), any::<i32>(), text),
        (text, text, text),
        proptest::option::of(text),
        proptest::collection::vec((1u64..5000, 0u64..4000, any::<bool>()), 0..5),
        proptest::collection::vec(
            (
                text,
                0u64..1 << 40,
                0u64..1 << 40,
                any::<bool>(),
                proptest::option::of((text, 1u32..100_000)),
            ),
            0..6,
        ),
    )
        .prop_map(
            |((sha, branch, time, target), (interp, cpu, limits), failure, trials, mods)| Run {
                commit: Commit {
                    sha,
                    parent: None,
                    branch,
                    time_unix_s: i64::from(time),
                },
                target,
                tool_version: "0.1.0".to_owned(),
                environment: Environment {
                    interpreter: interp,
                    packages_hash: crate::content_hash(["x"]),
                    cpu_model: cpu,
                    limits,
                },
                recorded_unix_ms: 0,
                outcome: failure.map_or(RunOutcome::Measured, |message| RunOutcome::Failed {
                    message,
                }),
                trials: trials
                    .into_iter()
                    .enumerate()
                    .map(|(i, (ready, cpu, ok))| trial(i, ready, cpu, ok))
                    .collect(),
                modules: mods
                    .into_iter()
                    .map(
                        |(module, cumulative_us, self_us, first_party, at)| ModuleTime {
                            module,
                            cumulative_us,
                            self_us,
                            first_party,
                            imported_at: at.map(|(file, line)| CallSite {
                                file,
                                line,
                                func: "<module>".to_owned(),
                            }),
                        },
                    )
                    .collect(),
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any run reads back from SQLite exactly as it was written, and a
    /// second write of it changes nothing.
    #[test]
    fn any_run_round_trips_through_sqlite(r in arb_run()) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&sqlite(dir.path(), "p")).unwrap();
        let Written::Stored(id) = store.record(&r).unwrap() else { panic!("not stored") };
        prop_assert_eq!(store.record(&r).unwrap(), Written::Existing(id));
        let back = store.runs(&RunFilter::default()).unwrap();
        prop_assert_eq!(back.len(), 1);
        prop_assert_eq!(&back[0].run, &r);
    }
}
