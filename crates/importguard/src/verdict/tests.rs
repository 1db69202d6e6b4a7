use std::path::Path;

use super::*;
use crate::importtime;
use crate::recorder::{self, Recording};
use std::collections::BTreeMap;

use crate::importtime::ImportLog;
use timeline::{EndMarks, ReadyMark, RequestMark, Stage, Timeline};

fn policy() -> Policy {
    Policy::new(
        ["torch", "transformers", "stanza"]
            .map(String::from)
            .to_vec(),
        Vec::new(),
    )
    .unwrap()
}

/// A recorded run: `testdata/NAME.importtime.log` and `NAME.records.jsonl`.
fn fixture(name: &str) -> (ImportLog, Recording) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/verdict/testdata");
    let log =
        importtime::parse(&std::fs::read(dir.join(format!("{name}.importtime.log"))).unwrap());
    let rec = recorder::read(&dir.join(format!("{name}.records.jsonl"))).unwrap();
    assert!(rec.ran(), "{name}: fixture without a start record");
    (log, rec)
}

fn t_of(rec: &Recording, name: &str) -> u64 {
    rec.imports
        .iter()
        .find(|i| i.name == name && !i.probe)
        .unwrap()
        .t_ns
}

/// A timeline with ready long after start-up and one health request.
fn timeline_after(rec: &Recording) -> Timeline {
    let end = rec.exit.as_ref().map_or(u64::MAX / 2, |e| e.t_ns);
    Timeline {
        spawned_ns: rec.start.as_ref().unwrap().t_ns - 1,
        ready: Some(ReadyMark {
            read_ns: end + 10,
            t_ns: None,
        }),
        requests: vec![RequestMark {
            op: "health".into(),
            sent_ns: end + 20,
            received_ns: None,
        }],
        end: EndMarks {
            shutdown_sent_ns: Some(end + 30),
            ..EndMarks::default()
        },
    }
}

fn judge_fixture(name: &str, timeline: Option<&Timeline>) -> ProcessVerdict {
    let (log, rec) = fixture(name);
    judge(
        &policy(),
        &Evidence {
            importtime: Some(&log),
            recording: Some(&rec),
            timeline,
        },
    )
}

fn origin(v: &Violation) -> String {
    let o = v.origin.as_ref().unwrap();
    let file = o
        .file
        .rsplit_once("boundary/")
        .map_or(o.file.as_str(), |(_, f)| f);
    format!("{file}:{}", o.line)
}

#[test]
fn an_eager_re_export_is_loaded_at_start_up_with_its_chain_line_and_cost() {
    let (log, rec) = fixture("eager");
    let tl = timeline_after(&rec);
    let v = judge(
        &policy(),
        &Evidence {
            importtime: Some(&log),
            recording: Some(&rec),
            timeline: Some(&tl),
        },
    );
    assert!(!v.holds());
    assert_eq!(v.recorder, RecorderState::Ran);
    let names: Vec<_> = v.violations.iter().map(|x| x.module.as_str()).collect();
    assert_eq!(names, ["torch", "transformers"]);
    let torch = &v.violations[0];
    assert_eq!(torch.status, ImportStatus::Loaded);
    assert_eq!(torch.chain, ["eagerworker", "eagerworker.model", "torch"]);
    assert_eq!(torch.chain_source, ChainSource::Importtime);
    assert_eq!(origin(torch), "workers/eagerworker/model.py:3");
    let lines: Vec<String> = torch
        .chain_lines
        .iter()
        .map(|f| {
            f.as_ref().map_or("-".to_owned(), |f| {
                format!("{}:{}", f.file.rsplit('/').next().unwrap(), f.line)
            })
        })
        .collect();
    assert_eq!(
        lines,
        ["<frozen runpy>:112", "__init__.py:5", "model.py:3"],
        "the re-export line is named"
    );
    assert_eq!(torch.stage, Some(Stage::Startup));
    assert_eq!(torch.cumulative_us, Some(292));
    assert_eq!(torch.beneath, ["torch._C"]);
    assert_eq!(origin(&v.violations[1]), "workers/eagerworker/model.py:4");
    assert!(v.probed.is_empty() && v.lazy.is_empty() && v.allowed.is_empty());
}

#[test]
fn import_module_has_no_importtime_line_but_the_recorder_names_it() {
    let (log, rec) = fixture("dyn");
    let v = judge(
        &policy(),
        &Evidence {
            importtime: Some(&log),
            recording: Some(&rec),
            timeline: None,
        },
    );
    assert_eq!(v.violations.len(), 1, "{:#?}", v.violations);
    let torch = &v.violations[0];
    assert_eq!(
        (torch.module.as_str(), torch.status),
        ("torch", ImportStatus::Loaded)
    );
    assert_eq!(torch.chain_source, ChainSource::Recorder);
    assert_eq!(torch.chain, ["__main__", "torch"]);
    assert_eq!(origin(torch), "workers/dynworker.py:8");
    assert!(!torch.in_importtime);
    assert_eq!(torch.cumulative_us, Some(133), "its submodules' subtrees");
    assert_eq!(torch.stage, None, "no timeline, no phase");
}

#[test]
fn a_guarded_import_of_a_missing_package_is_attempted_not_loaded() {
    let v = judge_fixture("try", None);
    assert_eq!(v.violations.len(), 1);
    let torch = &v.violations[0];
    assert_eq!(torch.status, ImportStatus::Attempted);
    assert_eq!(torch.detail.as_deref(), Some("not installed"));
    assert_eq!(origin(torch), "workers/tryworker.py:8");
}

#[test]
fn an_import_while_answering_health_belongs_to_that_request() {
    let (log, rec) = fixture("health");
    let t = t_of(&rec, "torch");
    let tl = Timeline {
        spawned_ns: rec.start.as_ref().unwrap().t_ns,
        ready: Some(ReadyMark {
            read_ns: t - 1000,
            t_ns: None,
        }),
        requests: vec![RequestMark {
            op: "health".into(),
            sent_ns: t - 500,
            received_ns: None,
        }],
        end: EndMarks {
            shutdown_sent_ns: Some(t + 1_000_000),
            ..EndMarks::default()
        },
    };
    let v = judge(
        &policy(),
        &Evidence {
            importtime: Some(&log),
            recording: Some(&rec),
            timeline: Some(&tl),
        },
    );
    let torch = &v.violations[0];
    assert_eq!(
        torch.stage,
        Some(Stage::Request {
            op: "health".into(),
            index: 1
        })
    );
    assert_eq!(
        torch.stage.as_ref().unwrap().to_string(),
        "health request #1"
    );
    assert_eq!(torch.importer.as_ref().unwrap().func, "probe_device");
    assert_eq!(torch.chain, ["torch"]);
}

#[test]
fn without_the_recorder_importtime_alone_judges_and_says_so() {
    let (log, _) = fixture("eager");
    let not_run = Recording::default();
    let v = judge(
        &policy(),
        &Evidence {
            importtime: Some(&log),
            recording: Some(&not_run),
            timeline: None,
        },
    );
    assert_eq!(v.recorder, RecorderState::DidNotRun);
    assert!(v.notes[0].contains("did not run"), "{:?}", v.notes);
    let torch = &v.violations[0];
    assert_eq!(torch.chain, ["eagerworker", "eagerworker.model", "torch"]);
    assert_eq!(
        (torch.status, torch.origin.as_ref(), torch.recorded),
        (ImportStatus::Loaded, None, false)
    );
    assert_eq!(v.violations.len(), 2);
    // --log: no recorder at all.
    let v = judge(
        &policy(),
        &Evidence {
            importtime: Some(&log),
            recording: None,
            timeline: None,
        },
    );
    assert_eq!(
        (v.recorder, v.violations.len()),
        (RecorderState::NotUsed, 2)
    );
    assert!(v.notes.is_empty());
}

#[test]
fn allowed_modules_are_listed_with_their_reason_not_flagged() {
    let (log, rec) = fixture("eager");
    let p = Policy::new(
        vec!["torch".into()],
        vec![Allowance {
            module: "torch._C".into(),
            reason: "stand-in core".into(),
        }],
    )
    .unwrap();
    let v = judge(
        &p,
        &Evidence {
            importtime: Some(&log),
            recording: Some(&rec),
            timeline: None,
        },
    );
    assert_eq!(v.violations.len(), 1);
    assert_eq!(v.allowed[0].module, "torch._C");
    assert_eq!(v.allowed[0].reason, "stand-in core");
    assert!(v.violations[0].beneath.is_empty());
}

fn attempt(name: &str, t: u64, stack: &[&str]) -> recorder::ImportAttempt {
    recorder::ImportAttempt {
        name: name.into(),
        t_ns: t,
        found: Some(true),
        blocked: false,
        probe: false,
        depth: Some(stack.len() as u32),
        parent: stack.last().map(|s| s.to_string()),
        by: None,
        first_party: None,
        stack: stack.iter().map(|s| s.to_string()).collect(),
        stack_by: Vec::new(),
        thread: None,
        error: None,
        channel: recorder::Channel::Both,
        reified: false,
        declared: None,
        audit_t_ns: None,
        file: None,
        finder: None,
    }
}

fn recording(imports: Vec<recorder::ImportAttempt>, exit: Option<(&[&str], &[&str])>) -> Recording {
    Recording {
        start: Some(serde_json::from_str(r#"{"t_ns": 0, "pid": 1, "version": 1}"#).unwrap()),
        imports,
        exit: exit.map(|(m, l)| recorder::Exit {
            t_ns: 99,
            modules: m.iter().map(|s| s.to_string()).collect(),
            lazy: l.iter().map(|s| s.to_string()).collect(),
        }),
        ..Recording::default()
    }
}

#[test]
fn blocked_failed_lazy_probed_and_submodule_attempts_are_told_apart() {
    let mut blocked = attempt("stanza", 1, &["__main__"]);
    blocked.blocked = true;
    blocked.found = None;
    let mut probe = attempt("torch", 2, &["__main__"]);
    probe.probe = true;
    let rec = recording(
        vec![
            blocked,
            probe,
            attempt("transformers", 3, &["__main__"]),
            attempt("torch", 4, &["__main__", "lazyuser"]),
            // `import torch.nn` after torch: a submodule, not a new root.
            attempt("torch.nn", 5, &["__main__"]),
        ],
        Some((&["sys", "torch", "torch.nn"], &["torch", "torch.nn"])),
    );
    let v = judge(
        &policy(),
        &Evidence {
            importtime: None,
            recording: Some(&rec),
            timeline: None,
        },
    );
    let got: Vec<_> = v
        .violations
        .iter()
        .map(|x| (x.module.as_str(), x.status))
        .collect();
    assert_eq!(
        got,
        [
            ("stanza", ImportStatus::Blocked),
            ("transformers", ImportStatus::Attempted)
        ]
    );
    assert!(
        v.violations[1]
            .detail
            .as_deref()
            .unwrap()
            .contains("import failed")
    );
    assert_eq!(v.violations[0].chain, ["__main__", "stanza"]);
    assert_eq!(v.lazy, ["torch"]);
    assert_eq!(v.probed, ["torch"]);
    assert!(v.notes.is_empty(), "{:?}", v.notes);
}

#[test]
fn an_attempt_after_the_exit_snapshot_is_not_called_failed() {
    // exit is at t=99 in `recording`.
    let rec = recording(vec![attempt("torch", 150, &[])], Some((&["sys"], &[])));
    let v = judge(
        &policy(),
        &Evidence {
            importtime: None,
            recording: Some(&rec),
            timeline: None,
        },
    );
    assert_eq!(v.violations[0].status, ImportStatus::Loaded);
}

#[test]
fn no_exit_record_means_found_is_loaded_and_a_note_says_why() {
    let rec = recording(vec![attempt("torch", 1, &[])], None);
    let v = judge(
        &policy(),
        &Evidence {
            importtime: None,
            recording: Some(&rec),
            timeline: None,
        },
    );
    assert_eq!(v.violations[0].status, ImportStatus::Loaded);
    assert!(v.notes.iter().any(|n| n.contains("no normal exit")));
}

#[test]
fn phases_follow_the_harness_timeline() {
    let tl = Timeline {
        spawned_ns: 0,
        ready: Some(ReadyMark {
            read_ns: 100,
            t_ns: None,
        }),
        requests: vec![
            RequestMark {
                op: "health".into(),
                sent_ns: 200,
                received_ns: None,
            },
            RequestMark {
                op: "health".into(),
                sent_ns: 300,
                received_ns: None,
            },
        ],
        end: EndMarks {
            shutdown_sent_ns: Some(400),
            ..EndMarks::default()
        },
    };
    let at = |t| tl.stage_at(t).to_string();
    assert_eq!(at(5), "start-up");
    assert_eq!(at(100), "after ready, before any request");
    assert_eq!(at(250), "health request #1");
    assert_eq!(at(399), "health request #2");
    assert_eq!(at(400), "shutdown");
    assert_eq!(Timeline::default().stage_at(7), Stage::Startup);
}

#[test]
fn merge_counts_processes_and_takes_the_median_cost() {
    let (log, rec) = fixture("eager");
    let one = judge(
        &policy(),
        &Evidence {
            importtime: Some(&log),
            recording: Some(&rec),
            timeline: None,
        },
    );
    let mut other = one.clone();
    other.violations[0].cumulative_us = Some(1000);
    other.violations.truncate(1);
    let merged = merge(&[one.clone(), other, one]);
    assert_eq!(merged.len(), 2);
    assert_eq!(
        (
            merged[0].first.module.as_str(),
            merged[0].processes,
            merged[0].of
        ),
        ("torch", 3, 3)
    );
    assert_eq!(merged[0].median_cumulative_us, Some(292));
    assert_eq!(
        (merged[1].first.module.as_str(), merged[1].processes),
        ("transformers", 2)
    );
}

#[test]
fn slowest_lists_the_top_cumulative_with_chains() {
    let (log, _) = fixture("eager");
    let top = slowest(&log, 5);
    assert_eq!(top.len(), 5);
    assert!(
        top.windows(2)
            .all(|w| w[0].cumulative_us >= w[1].cumulative_us)
    );
    assert!(top.iter().all(|s| s.chain.last() == Some(&s.module)));
    // Disjoint: no listed import lies inside another listed one.
    for a in &top {
        for b in &top {
            assert!(
                a.module == b.module || !b.chain[..b.chain.len() - 1].contains(&a.module),
                "{top:?}"
            );
        }
    }
    let max = log.nodes().iter().map(|n| n.cumulative_us).max().unwrap();
    assert_eq!(top[0].cumulative_us, max);
}

/// A worker whose two pool workers (spawned children) import torch: each is
/// a violation in its own process, and a merge counts the worker once.
#[test]
fn children_are_judged_in_their_processes_and_merged_per_worker() {
    let parse = |t: &str| Recording::parse(t.as_bytes());
    let mut rec = parse(
        r#"{"type":"start","t_ns":1,"pid":10,"version":2,"how":"root"}
{"type":"spawn","t_ns":50,"kind":"fork_exec","argv":["python3","-c","spawn_main()"],"by":{"file":"/app/w.py","line":19}}
{"type":"spawn","t_ns":51,"kind":"fork_exec","argv":["python3","-c","spawn_main()"],"by":{"file":"/app/w.py","line":19}}
{"type":"exit","t_ns":900,"modules":["sys"]}"#,
    );
    for pid in [11, 12] {
        rec.children.push(parse(&format!(
            r#"{{"type":"start","t_ns":6{pid},"pid":{pid},"version":2,"how":"child","parent":[10,0],"ppid":10,"orig_argv":["python3","-c","spawn_main()"]}}
{{"type":"import","name":"torch","t_ns":7{pid},"channel":"both","found":true,"by":{{"file":"/app/w.py","line":12}},"stack":["__mp_main__"]}}"#
        )));
    }
    let tl = Timeline {
        spawned_ns: 0,
        ready: Some(ReadyMark {
            read_ns: 20,
            t_ns: None,
        }),
        requests: vec![RequestMark {
            op: "health".into(),
            sent_ns: 40,
            received_ns: None,
        }],
        end: EndMarks {
            shutdown_sent_ns: Some(800),
            ..EndMarks::default()
        },
    };
    let v = judge(
        &policy(),
        &Evidence {
            importtime: None,
            recording: Some(&rec),
            timeline: Some(&tl),
        },
    );
    assert_eq!(v.violations.len(), 2, "{:#?}", v.violations);
    for (x, pid) in v.violations.iter().zip([11, 12]) {
        let p = x.process.as_ref().unwrap();
        assert_eq!((p.image.pid, p.relation), (pid, recorder::Relation::Child));
        assert_eq!(p.started_at.as_ref().unwrap().line, 19);
        assert_eq!(
            x.stage,
            Some(Stage::Request {
                op: "health".into(),
                index: 1
            })
        );
        assert_eq!(x.channel, Some(recorder::Channel::Both));
    }
    assert!(v.missing.is_none() && !v.holds());
    let merged = merge(&[v.clone(), v]);
    assert_eq!(merged.len(), 1, "{merged:#?}");
    assert_eq!(
        (merged[0].processes, merged[0].of),
        (2, 2),
        "each worker counted once"
    );
}

/// A child started without the recorder is noted only when it is (or may
/// be) a Python interpreter, named: not `/sbin/ldconfig -p`.
#[test]
fn a_child_without_the_recorder_is_noted_only_when_it_may_run_python() {
    let dir = tempfile::tempdir().unwrap();
    let script = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let py_script = script("tool", "#!/usr/bin/env python3\nprint(1)\n");
    let perl_script = script("report", "#!/usr/bin/perl\nprint 1;\n");
    let elf = script("helper", "\x7fELF\x02\x01\x01");
    let spawn = |t: u32, argv: &[&str]| {
        format!(
            r#"{{"type":"spawn","t_ns":{t},"kind":"subprocess","argv":{},"env":{{"record":false,"pythonpath":false}},"by":{{"file":"/app/w.py","line":{t}}}}}"#,
            serde_json::to_string(argv).unwrap()
        )
    };
    let text = [
        r#"{"type":"start","t_ns":1,"pid":10,"version":2,"how":"root"}"#.to_owned(),
        spawn(2, &["/sbin/ldconfig", "-p"]),
        spawn(3, &[&elf]),
        spawn(4, &[&perl_script]),
        spawn(5, &["/usr/bin/python3.11", "-c", "pass"]),
        spawn(6, &["env", "-i", "A=1", "python3", "-c", "pass"]),
        spawn(7, &[&py_script]),
        spawn(8, &["/bin/sh", "-c", "make all"]),
        r#"{"type":"exit","t_ns":900,"modules":["sys"]}"#.to_owned(),
    ]
    .join("\n");
    let rec = Recording::parse(text.as_bytes());
    let v = judge(
        &policy(),
        &Evidence {
            importtime: None,
            recording: Some(&rec),
            timeline: None,
        },
    );
    let notes: Vec<&String> = v
        .notes
        .iter()
        .filter(|n| n.contains("without the import recorder"))
        .collect();
    let lines: Vec<&str> = notes
        .iter()
        .map(|n| {
            n.split(" at /app/w.py:")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(lines, ["5", "6", "7", "8"], "{notes:#?}");
    assert!(
        notes[0].contains("the Python interpreter `/usr/bin/python3.11`"),
        "{}",
        notes[0]
    );
    assert!(
        notes[1].contains("the Python interpreter `python3`"),
        "{}",
        notes[1]
    );
    assert!(
        notes[2].contains(&format!("the Python interpreter `{py_script}`")),
        "{}",
        notes[2]
    );
    assert!(
        notes[3].contains("`/bin/sh` (it could not be told whether it runs Python)"),
        "{}",
        notes[3]
    );
    assert!(
        !v.notes.iter().any(|n| n.contains("ldconfig")),
        "{:#?}",
        v.notes
    );
}

/// A worker whose `main` imports torch: its cumulative time is the whole
/// start-up, the answer is torch's own modules.
const MAIN_IMPORTS_TORCH: &str = "\
import time: self [us] | cumulative | imported package
import time:       100 |        100 |       torch._C
import time:       300 |        300 |       torch.nn
import time:      5000 |       5400 |     torch
import time:        50 |         50 |     svc.util
import time:        70 |       5520 |   svc.main
import time:        10 |       5530 | svc
import time:        40 |         40 | json
";

#[test]
fn by_package_sums_self_time_over_each_packages_modules() {
    let log = importtime::parse(MAIN_IMPORTS_TORCH.as_bytes());
    let top = by_package(&log, 8);
    let got: Vec<(&str, u32, i64)> = top
        .iter()
        .map(|p| (p.package.as_str(), p.modules, p.self_us))
        .collect();
    assert_eq!(got, [("torch", 3, 5400), ("svc", 3, 130), ("json", 1, 40)]);
    assert_eq!(by_package(&log, 1).len(), 1);
    let own = first_party_modules(&log, &["svc".to_owned()], 5);
    let names: Vec<(&str, i64)> = own.iter().map(|s| (s.module.as_str(), s.self_us)).collect();
    assert_eq!(names, [("svc.main", 70), ("svc.util", 50), ("svc", 10)]);
}

#[test]
fn by_package_agrees_with_an_independent_sum_over_a_real_log() {
    let (log, _) = fixture("eager");
    let range = log.node_range((!log.sessions().is_empty()).then_some(0));
    let mut sums: BTreeMap<String, (u32, i64)> = BTreeMap::new();
    for i in range {
        let id = crate::importtime::NodeId(i);
        let name = log.name(id);
        let top = name.split('.').next().unwrap().to_owned();
        let e = sums.entry(top).or_default();
        e.0 += 1;
        e.1 += log.node(id).self_us;
    }
    let all = by_package(&log, usize::MAX);
    assert_eq!(all.len(), sums.len());
    for p in &all {
        assert_eq!(sums[&p.package], (p.modules, p.self_us), "{}", p.package);
    }
    assert!(all.windows(2).all(|w| w[0].self_us >= w[1].self_us));
}
