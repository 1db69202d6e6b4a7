use super::*;

fn fixture(name: &str) -> Recording {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/recorder/testdata")
        .join(name);
    read(&path).unwrap()
}

#[test]
fn a_crash_keeps_every_whole_record_and_skips_the_cut_line() {
    let rec = fixture("crashed.jsonl");
    assert!(rec.ran());
    let start = rec.start.as_ref().unwrap();
    assert_eq!(
        (start.t_ns, start.pid, start.forbid.as_slice()),
        (1000, 42, &["torch".to_owned()][..])
    );
    assert_eq!(
        rec.chain,
        Some(Chain {
            t_ns: 1100,
            file: None
        })
    );
    let names: Vec<_> = rec.imports.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["w", "torch"]);
    assert_eq!(rec.imports[1].stack, ["__main__", "w", "w.model"]);
    assert_eq!(
        rec.imports[1].origin().unwrap().to_string(),
        "/app/w/model.py:3"
    );
    assert_eq!(rec.skipped_lines, [5]);
    assert_eq!(rec.exit, None);
}

#[test]
fn blocked_missing_threaded_errors_unknown_and_exit_records_are_typed() {
    let rec = fixture("exited.jsonl");
    let torch = &rec.imports[0];
    assert!(torch.blocked);
    assert_eq!(torch.found, None);
    let stanza = &rec.imports[1];
    assert_eq!((stanza.found, stanza.thread), (Some(false), Some(140000)));
    assert_eq!(rec.errors[0].place, "frames");
    assert_eq!(
        rec.skipped_lines,
        [6],
        "an unknown record type is skipped, not fatal"
    );
    let exit = rec.exit.as_ref().unwrap();
    assert_eq!(exit.lazy, ["lazy_thing"]);
    assert_eq!(
        rec.chain.unwrap().file.as_deref(),
        Some("/venv/lib/python3.11/site-packages/sitecustomize.py")
    );
}

#[test]
fn a_missing_file_means_the_recorder_did_not_run() {
    let rec = read(Path::new("/nonexistent/coldstart/records.jsonl")).unwrap();
    assert!(!rec.ran());
    assert_eq!(rec, Recording::default());
}

#[test]
fn crlf_blank_lines_and_garbage_never_panic() {
    let rec = Recording::parse(
        b"\r\n{\"type\":\"start\",\"t_ns\":1,\"pid\":2}\r\n\xff\xfe\n{\"type\":\"import\"",
    );
    assert!(rec.ran());
    assert_eq!(rec.skipped_lines, [3, 4]);
}

#[test]
fn policy_is_encoded_for_the_bootstrap_and_bad_names_are_refused() {
    let p = RecorderPolicy {
        forbid: vec!["torch".into(), "transformers".into()],
        allow: vec!["transformers.utils".into()],
        block: true,
        ..Default::default()
    };
    assert_eq!(
        p.encode().unwrap(),
        "block=1;forbid=torch,transformers;allow=transformers.utils;own="
    );
    // The project's own names; one that cannot be imported is left out.
    let own = RecorderPolicy {
        own: vec!["svc".into(), "my-tool".into(), "app".into()],
        ..p.clone()
    };
    assert!(own.encode().unwrap().ends_with(";own=svc,app"));
    for bad in ["", "a;b", "a,b", "a..b", ".a", "1a", "a b"] {
        let p = RecorderPolicy {
            forbid: vec![bad.into()],
            ..Default::default()
        };
        assert!(
            matches!(p.encode(), Err(RecorderError::BadPattern { .. })),
            "{bad:?}"
        );
    }
    assert!(is_module_pattern("_private.sub_2"));
}

#[test]
fn prepare_writes_a_private_bootstrap_first_on_pythonpath() {
    use std::os::unix::fs::PermissionsExt;
    let setup = Recorder::prepare(&RecorderPolicy::default(), Some(OsStr::new("/a:/b"))).unwrap();
    let mode = std::fs::metadata(setup.dir()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let env: std::collections::HashMap<_, _> = setup.env().iter().cloned().collect();
    let pp = env[OsStr::new("PYTHONPATH")].to_string_lossy().into_owned();
    let (first, rest) = pp.split_once(':').unwrap();
    assert_eq!(rest, "/a:/b");
    assert_eq!(
        std::fs::read_to_string(Path::new(first).join("sitecustomize.py")).unwrap(),
        bootstrap::STUB
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(first).parent().unwrap().join("bootstrap.py")).unwrap(),
        BOOTSTRAP
    );
    assert_eq!(env[OsStr::new(RECORD_ENV)], setup.record_path().as_os_str());
    let dir = setup.dir().to_path_buf();
    drop(setup);
    assert!(!dir.exists(), "the folder goes away with the setup");
}

#[test]
fn an_attempt_both_channels_wrote_is_read_as_one() {
    let rec = Recording::parse(
        br#"{"type":"start","t_ns":1,"pid":2,"version":2}
{"type":"import","name":"torch","t_ns":10,"channel":"audit","by":{"file":"w.py","line":3}}
{"type":"import","name":"json","t_ns":11,"channel":"finder","found":true}
{"type":"import","name":"torch","t_ns":12,"channel":"both","audit_t_ns":10,"found":true}
"#,
    );
    let names: Vec<_> = rec
        .imports
        .iter()
        .map(|i| (i.name.as_str(), i.channel))
        .collect();
    assert_eq!(names, [("torch", Channel::Both), ("json", Channel::Finder)]);
    let torch = &rec.imports[0];
    assert_eq!((torch.t_ns, torch.found), (10, Some(true)));
    assert_eq!(
        torch.by.as_ref().unwrap().to_string(),
        "w.py:3",
        "the audit record's line is kept"
    );
}

#[test]
fn a_record_file_of_an_unknown_format_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.jsonl");
    std::fs::write(
        &path,
        "{\"type\":\"start\",\"t_ns\":1,\"pid\":2,\"version\":99}\n",
    )
    .unwrap();
    let err = read(&path).unwrap_err();
    assert!(matches!(err, RecorderError::Format { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("format version 99") && text.contains("rerun with one build"),
        "{text}"
    );
}

#[test]
fn the_process_tree_links_each_image_to_the_line_that_started_it() {
    let root = Recording::parse(
        br#"{"type":"start","t_ns":1,"pid":10,"version":2,"how":"root","orig_argv":["python3","w.py"]}
{"type":"spawn","t_ns":5,"kind":"subprocess","argv":["python3","-c","a"],"by":{"file":"w.py","line":4}}
{"type":"spawn","t_ns":6,"kind":"subprocess","argv":["python3","-c","b"],"by":{"file":"w.py","line":5}}
{"type":"spawn","t_ns":9,"kind":"exec","argv":["python3","w.py","--again"],"by":{"file":"w.py","line":7}}
"#,
    );
    let child = |text: &[u8]| Recording::parse_images(text).remove(0);
    let mut rec = root;
    rec.children = vec![
        // Started second but matched by its command line, not by time.
        child(br#"{"type":"start","t_ns":7,"pid":11,"version":2,"how":"child","parent":[10,0],"ppid":10,"orig_argv":["/usr/bin/python3","-c","a"]}"#),
        child(br#"{"type":"start","t_ns":8,"pid":12,"version":2,"how":"child","parent":[10,0],"ppid":10,"orig_argv":["/usr/bin/python3","-c","b"]}"#),
        child(br#"{"type":"start","t_ns":8,"pid":13,"version":2,"how":"fork","forked":true,"parent":[10,0],"by":{"file":"w.py","line":6}}"#),
        child(br#"{"type":"start","t_ns":10,"pid":10,"gen":1,"version":2,"how":"exec","parent":[10,0]}"#),
    ];
    let tree = rec.processes();
    let row = |p: &ProcessInfo| {
        (
            p.image.pid,
            p.image.exec_gen,
            p.relation,
            p.parent.map(|i| i.pid),
            p.started_at.as_ref().map(|f| f.line),
        )
    };
    let rows: Vec<_> = tree.iter().map(row).collect();
    assert_eq!(
        rows,
        [
            (10, 0, Relation::Root, None, None),
            (11, 0, Relation::Child, Some(10), Some(4)),
            (12, 0, Relation::Child, Some(10), Some(5)),
            (13, 0, Relation::Fork, Some(10), Some(6)),
            (10, 1, Relation::Exec, Some(10), Some(7)),
        ]
    );
    assert_eq!(
        tree[1].to_string(),
        "pid 11 (/usr/bin/python3 -c a), a subprocess child of pid 10, started at w.py:4"
    );
    assert_eq!(
        tree[4].to_string(),
        "pid 10 after exec #1 (python3 w.py --again), the worker after os.exec, started at w.py:7"
    );
}

#[test]
fn a_reused_pid_file_splits_into_images_at_each_start() {
    let images = Recording::parse_images(
        br#"{"type":"start","t_ns":1,"pid":5,"version":2}
{"type":"import","name":"a","t_ns":2}
{"type":"start","t_ns":3,"pid":5,"version":2}
{"type":"import","name":"b","t_ns":4}
"#,
    );
    let names: Vec<Vec<&str>> = images
        .iter()
        .map(|r| r.imports.iter().map(|i| i.name.as_str()).collect())
        .collect();
    assert_eq!(names, [vec!["a"], vec!["b"]]);
}

/// The bootstrap in a real interpreter: records, chains, blocks, and stays
/// out of the way of `-I`.
#[test]
fn a_whole_start_record_completes_the_short_one_of_its_image() {
    // Format 3: the worker writes a short start record at once and the
    // whole one with its first flush; a pid reused later is a new image.
    let text = br#"
{"type":"start","t_ns":7,"pid":5,"gen":0,"how":"root","version":3,"audit":true}
{"type":"start","t_ns":7,"pid":5,"gen":0,"how":"root","version":3,"audit":true,"argv":["-c"],"python":"3.11.7"}
{"type":"import","name":"a","t_ns":8,"channel":"both","found":true}
{"type":"start","t_ns":9,"pid":5,"gen":0,"how":"root","version":3}
{"type":"import","name":"b","t_ns":10,"channel":"both","found":true}
"#;
    let rec = Recording::parse(text);
    let start = rec.start.as_ref().unwrap();
    assert_eq!(
        (start.t_ns, start.argv.as_slice()),
        (7, ["-c".to_owned()].as_slice())
    );
    assert_eq!(start.python.as_deref(), Some("3.11.7"));
    let images = Recording::parse_images(text);
    assert_eq!(images.len(), 2, "{images:?}");
    assert_eq!(images[0].start.as_ref().unwrap().argv, ["-c"]);
    assert_eq!(images[1].start.as_ref().unwrap().t_ns, 9);
    // The short record alone (the worker died before its first flush)
    // still says the recorder ran, and how.
    let short = Recording::parse(&text[..text.iter().position(|&b| b == b'}').unwrap() + 2]);
    assert!(short.ran());
    assert_eq!(short.start.as_ref().unwrap().audit, Some(true));
}

mod live {
    use super::*;
    use std::process::Command;

    use test_interpreters::default_python as python;

    fn run(
        setup: &RecorderSetup,
        extra_path: Option<&Path>,
        args: &[&str],
    ) -> std::process::Output {
        let mut cmd = Command::new(python());
        for (k, v) in setup.env() {
            cmd.env(k, v);
        }
        if let Some(p) = extra_path {
            let mut pp = setup.env()[0].1.clone();
            pp.push(":");
            pp.push(p);
            cmd.env("PYTHONPATH", pp);
        }
        cmd.args(args).output().unwrap()
    }

    /// The stub leaves the import system's cache of `sitecustomize` holding
    /// the bootstrap's own code, so the next worker of the same version runs
    /// it without compiling or running the stub, even with
    /// PYTHONDONTWRITEBYTECODE (which keeps the interpreter from writing
    /// that cache itself), and still records.
    #[test]
    fn the_next_worker_runs_the_bootstrap_from_the_import_cache() {
        let setup = Recorder::prepare(&RecorderPolicy::default(), None).unwrap();
        let site = PathBuf::from(setup.env()[0].1.clone());
        let run_once = |setup: &RecorderSetup| {
            let mut cmd = Command::new(python());
            cmd.envs(setup.env().iter().map(|(k, v)| (k, v)))
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .env("PYTHONVERBOSE", "1")
                .args(["-c", "import colorsys"]);
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stderr).into_owned()
        };
        // The first run may be the one that writes the cache.
        run_once(&setup);
        let second = Recorder::prepare(&RecorderPolicy::default(), None).unwrap();
        let verbose = run_once(&second);
        let cached = site.join("__pycache__");
        assert!(
            verbose.lines().any(|l| l.starts_with("# code object from")
                && l.contains(cached.to_str().unwrap())
                && l.contains("sitecustomize")),
            "sitecustomize was not loaded from {}:\n{verbose}",
            cached.display()
        );
        // What the cache holds is the bootstrap (the stub has no chain).
        let pyc = std::fs::read_dir(&cached)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "pyc"))
            .unwrap();
        let bytes = std::fs::read(&pyc).unwrap();
        assert!(
            bytes.windows(9).any(|w| w == b"_cs_chain"),
            "{} holds the stub, not the bootstrap",
            pyc.display()
        );
        let rec = second.read().unwrap();
        assert!(rec.ran() && rec.errors.is_empty(), "{rec:?}");
        assert!(rec.imports.iter().any(|i| i.name == "colorsys"), "{rec:?}");
    }

    #[test]
    fn records_attempts_chains_and_blocks() {
        let pre = tempfile::tempdir().unwrap();
        std::fs::write(
            pre.path().join("sitecustomize.py"),
            "import sys\nsys.stderr.write('pre-existing sitecustomize ran\\n')\nMARK = 1\n",
        )
        .unwrap();
        let policy = RecorderPolicy {
            forbid: vec!["fakeforbidden".into()],
            allow: vec![],
            block: true,
            ..Default::default()
        };
        let setup = Recorder::prepare(&policy, None).unwrap();
        let code = "import sitecustomize, sys, importlib\n\
                    assert sitecustomize.MARK == 1\n\
                    assert not any('coldstart-recorder' in p for p in sys.path), sys.path\n\
                    try:\n    import fakeforbidden.sub\nexcept ImportError as e:\n    print(e)\n\
                    try:\n    import surely_not_installed_xyz\nexcept ImportError:\n    pass\n\
                    importlib.import_module('colorsys')\n\
                    import importlib.util\n\
                    assert importlib.util.find_spec('fakeforbidden') is None\n";
        let out = run(&setup, Some(pre.path()), &["-c", code]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("pre-existing sitecustomize ran"),
            "{stderr}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("coldstart import policy: `fakeforbidden` is forbidden"),
            "{stdout}"
        );
        let rec = setup.read().unwrap();
        assert!(
            rec.ran() && rec.errors.is_empty() && rec.skipped_lines.is_empty(),
            "{rec:?}"
        );
        assert!(
            rec.chain
                .as_ref()
                .unwrap()
                .file
                .as_deref()
                .unwrap()
                .ends_with("sitecustomize.py")
        );
        let find = |n: &str| {
            rec.imports
                .iter()
                .find(|i| i.name == n)
                .unwrap_or_else(|| panic!("{n} not recorded: {rec:?}"))
        };
        let forbidden = find("fakeforbidden");
        assert!(forbidden.blocked);
        assert_eq!(
            (forbidden.depth, forbidden.stack.as_slice()),
            (Some(1), ["__main__".to_string()].as_slice()),
            "a forbidden name: the whole stack of executing modules"
        );
        let probe = rec
            .imports
            .iter()
            .find(|i| i.name == "fakeforbidden" && i.probe)
            .unwrap();
        assert!(
            probe.blocked,
            "a blocked probe is told `not installed`, not raised at"
        );
        let missing = find("surely_not_installed_xyz");
        assert_eq!(missing.found, Some(false));
        let colorsys = find("colorsys");
        assert_eq!(colorsys.found, Some(true));
        assert_eq!(
            (
                &colorsys.by,
                colorsys.depth,
                colorsys.parent.as_deref(),
                colorsys.stack.len()
            ),
            (&None, None, None, 0),
            "a name outside the policy is not walked: no frame, no stack"
        );
        let exit = rec.exit.as_ref().unwrap();
        assert!(exit.modules.iter().any(|m| m == "colorsys"));
        assert!(!exit.modules.iter().any(|m| m == "fakeforbidden"));
        assert!(rec.start.as_ref().unwrap().t_ns <= colorsys.t_ns && colorsys.t_ns <= exit.t_ns);
    }

    /// A forbidden name's record holds the line that imported every module
    /// on its chain, read while they were all executing: here `__main__`
    /// imports `linka` (line 2), whose function `load` imports `linkb`
    /// (line 3), whose body imports the forbidden `fakeforbidden` (line 2).
    #[test]
    fn a_forbidden_record_holds_the_line_of_every_link() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "linka.py",
            "def load():\n    x = 1\n    import linkb\n\nload()\n",
        );
        write("linkb.py", "# the forbidden import\nimport fakeforbidden\n");
        write("fakeforbidden.py", "");
        write("main.py", "# the worker\nimport linka\n");
        let policy = RecorderPolicy {
            forbid: vec!["fakeforbidden".into()],
            ..RecorderPolicy::default()
        };
        let setup = Recorder::prepare(&policy, Some(dir.path().as_os_str())).unwrap();
        let out = run(
            &setup,
            None,
            &[dir.path().join("main.py").to_str().unwrap()],
        );
        assert!(out.status.success(), "{out:?}");
        let rec = setup.read().unwrap();
        let f = rec
            .imports
            .iter()
            .find(|i| i.name == "fakeforbidden")
            .unwrap();
        assert_eq!(f.stack, ["__main__", "linka", "linkb"]);
        let lines: Vec<_> = f
            .stack_by
            .iter()
            .map(|b| {
                b.as_ref().map(|b| {
                    (
                        Path::new(&b.file)
                            .file_name()
                            .unwrap()
                            .to_str()
                            .unwrap()
                            .to_owned(),
                        b.line,
                    )
                })
            })
            .collect();
        assert_eq!(
            lines,
            [
                None,
                Some(("main.py".to_owned(), 2)),
                Some(("linka.py".to_owned(), 3)),
            ],
            "{f:?}"
        );
        assert_eq!(f.by.as_ref().map(|b| b.line), Some(2));
        assert_eq!(f.depth, Some(3));
    }

    /// With a project root, the first-party line is the first frame the one
    /// first-party rule accepts: a vendored `site-packages` module that did
    /// the import is skipped for the worker's own line that imported it.
    #[test]
    fn the_first_party_line_follows_the_project_rule() {
        let dir = tempfile::tempdir().unwrap();
        let vendor = dir.path().join("vendor").join("site-packages");
        std::fs::create_dir_all(&vendor).unwrap();
        std::fs::write(vendor.join("shim.py"), "import fakeforbidden\n").unwrap();
        std::fs::write(vendor.join("fakeforbidden.py"), "").unwrap();
        std::fs::write(dir.path().join("main.py"), "# the worker\nimport shim\n").unwrap();
        let first_party_of = |root: Option<PathBuf>| {
            let policy = RecorderPolicy {
                forbid: vec!["fakeforbidden".into()],
                root,
                ..RecorderPolicy::default()
            };
            let setup = Recorder::prepare(&policy, Some(vendor.as_os_str())).unwrap();
            let out = run(
                &setup,
                None,
                &[dir.path().join("main.py").to_str().unwrap()],
            );
            assert!(out.status.success(), "{out:?}");
            let rec = setup.read().unwrap();
            let f = rec
                .imports
                .iter()
                .find(|i| i.name == "fakeforbidden")
                .unwrap()
                .clone();
            let origin = f.first_party.or(f.by).unwrap();
            (
                Path::new(&origin.file)
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned(),
                origin.line,
            )
        };
        assert_eq!(first_party_of(None), ("shim.py".to_owned(), 1));
        assert_eq!(
            first_party_of(Some(dir.path().to_path_buf())),
            ("main.py".to_owned(), 2)
        );
    }

    #[test]
    fn threads_forks_and_a_closed_record_file_never_break_the_worker_nor_lose_records() {
        let setup = Recorder::prepare(&RecorderPolicy::default(), None).unwrap();
        let code = "import os, threading\n\
                    t = threading.Thread(target=lambda: __import__('colorsys'))\n\
                    t.start(); t.join()\n\
                    pid = os.fork()\n\
                    if pid == 0:\n    import wave\n    os._exit(0)\n\
                    os.waitpid(pid, 0)\n\
                    os.closerange(3, 1024)\n\
                    g = open(__import__('sys').argv[1], 'w')\n\
                    import fractions\n\
                    g.close()\n\
                    print('still fine')\n";
        let theirs = tempfile::NamedTempFile::new().unwrap();
        let out = run(&setup, None, &["-c", code, theirs.path().to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "still fine\n");
        let written = std::fs::read_to_string(theirs.path()).unwrap();
        assert_eq!(written, "", "the recorder wrote into the worker's own file");
        let rec = setup.read().unwrap();
        let colorsys = rec.imports.iter().find(|i| i.name == "colorsys").unwrap();
        assert!(colorsys.thread.is_some(), "{colorsys:?}");
        assert!(
            !rec.imports.iter().any(|i| i.name == "wave"),
            "the forked child writes its own file"
        );
        assert_eq!(rec.child_files.len(), 1);
        let child = read(&rec.child_files[0]).unwrap();
        assert!(child.start.as_ref().unwrap().forked);
        assert!(child.imports.iter().any(|i| i.name == "wave"));
        // Its descriptor closed, and its number taken by the worker's own
        // file: the recorder opened its file again by name, and wrote
        // nothing into the worker's.
        assert!(rec.imports.iter().any(|i| i.name == "fractions"), "{rec:?}");
        assert!(rec.exit.is_some(), "{rec:?}");
    }

    /// A launcher that forks and stays the parent (a shell whose command
    /// goes on after Python), started as a process group of its own as the
    /// harness starts a worker: the first image names it, then the process
    /// outside the group that started it (this test), and no further.
    /// Runs `python -c CODE; true` through bash, started as a process group
    /// of its own as the harness starts a worker (bash forks and stays the
    /// parent): bash's pid and what was recorded.
    fn through_bash(code: &str) -> (u32, Recording) {
        use std::os::unix::process::CommandExt as _;
        let setup = Recorder::prepare(&RecorderPolicy::default(), None).unwrap();
        let script = format!("'{}' -c '{code}'; true", python().display());
        let mut cmd = Command::new("bash");
        cmd.envs(setup.env().iter().map(|(k, v)| (k, v)))
            .args(["-c", &script])
            .process_group(0);
        let child = cmd.spawn().unwrap();
        let bash = child.id();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        (bash, setup.read().unwrap())
    }

    #[test]
    fn the_first_image_names_the_launcher_above_it_up_to_the_group() {
        let (bash, rec) = through_bash("import colorsys");
        let start = rec.start.as_ref().expect("the recorder ran");
        assert_eq!(start.how(), StartHow::Root);
        assert_eq!(start.ppid, Some(bash));
        let pids: Vec<u32> = start.ancestors.iter().map(|a| a.pid).collect();
        assert_eq!(pids, [bash, std::process::id()], "{:?}", start.ancestors);
        assert_eq!(start.ancestors[0].name, "bash");
        assert!(!start.ancestors[0].is_python());
    }

    /// Two first images on one record path: the one that runs while the
    /// other holds the file writes its own beside it, and so does one
    /// that runs after the file was written (a shell running python
    /// twice); the reader finds all three.
    #[test]
    fn a_first_image_that_finds_the_file_taken_writes_its_own() {
        let setup = Recorder::prepare(&RecorderPolicy::default(), None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (go, done) = (dir.path().join("go"), dir.path().join("done"));
        let made = Command::new("mkfifo").arg(&go).arg(&done).status().unwrap();
        assert!(made.success());
        let py = python().display().to_string();
        // The first holds the file (its recorder ran before its code) until
        // the second, started once the first's code runs, has finished.
        let script = format!(
            "'{py}' -c 'import colorsys; open(\"{go}\", \"w\").write(\"x\"); open(\"{done}\").read()' &\n\
             cat '{go}' > /dev/null\n\
             '{py}' -c 'import wave; open(\"{done}\", \"w\").write(\"x\")'\n\
             wait\n\
             '{py}' -c 'import fractions'\n",
            go = go.display(),
            done = done.display(),
        );
        let out = Command::new("bash")
            .envs(setup.env().iter().map(|(k, v)| (k, v)))
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let rec = setup.read().unwrap();
        let names = |r: &Recording| -> Vec<String> {
            r.imports
                .iter()
                .filter(|i| ["colorsys", "wave", "fractions"].contains(&i.name.as_str()))
                .map(|i| i.name.clone())
                .collect()
        };
        assert_eq!(names(&rec), ["colorsys"], "{rec:?}");
        assert_eq!(rec.child_files.len(), 2, "{:?}", rec.child_files);
        let others: Vec<Vec<String>> = rec.children.iter().map(names).collect();
        assert_eq!(
            others,
            [vec!["wave".to_owned()], vec!["fractions".to_owned()]]
        );
        for image in rec.images() {
            let start = image.start.as_ref().unwrap();
            assert_eq!(start.how(), StartHow::Root);
            assert!(!start.argv.is_empty(), "the whole start record: {start:?}");
            assert!(image.exit.is_some());
        }
    }

    /// A worker killed before it wrote anything it kept back leaves the
    /// short start record: the recorder ran, in that pid, with its hook.
    #[test]
    fn a_worker_killed_while_starting_leaves_its_short_start_record() {
        let setup = Recorder::prepare(&RecorderPolicy::default(), None).unwrap();
        let code = "import os, signal, colorsys\nos.kill(os.getpid(), signal.SIGKILL)\n";
        let mut cmd = Command::new(python());
        cmd.envs(setup.env().iter().map(|(k, v)| (k, v)))
            .args(["-c", code]);
        let child = cmd.spawn().unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        assert!(!out.status.success());
        let rec = setup.read().unwrap();
        let start = rec.start.as_ref().expect("the recorder ran");
        assert_eq!(start.pid, pid);
        assert_eq!(start.audit, Some(true));
        assert_eq!(start.version, FORMAT_VERSION);
        assert!(start.argv.is_empty(), "kept back: {start:?}");
        assert!(rec.imports.is_empty() && rec.exit.is_none(), "{rec:?}");
    }

    /// The same through a launcher (`bash`, which stays the parent): the
    /// short record names it, so the harness can still tell which process
    /// it started.
    #[test]
    fn a_worker_killed_while_starting_still_names_its_launcher() {
        let (bash, rec) = through_bash("import os, signal; os.kill(os.getpid(), signal.SIGKILL)");
        let start = rec.start.as_ref().expect("the recorder ran");
        assert!(start.argv.is_empty(), "only the short record: {start:?}");
        let pids: Vec<u32> = start.ancestors.iter().map(|a| a.pid).collect();
        assert_eq!(pids, [bash, std::process::id()], "{start:?}");
    }

    #[test]
    fn isolated_mode_leaves_no_start_record() {
        let setup = Recorder::prepare(&RecorderPolicy::default(), None).unwrap();
        let out = run(&setup, None, &["-I", "-c", "import colorsys"]);
        assert!(out.status.success());
        assert!(!setup.read().unwrap().ran());
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn frame() -> impl Strategy<Value = Option<CallSite>> {
        proptest::option::of(
            ("[ -~]{0,20}", 1u32..5000, "[a-z_<>]{1,10}").prop_map(|(file, line, func)| CallSite {
                file,
                line,
                func,
            }),
        )
    }

    fn attempt() -> impl Strategy<Value = ImportAttempt> {
        (
            "[a-z_][a-z0-9_.]{0,20}",
            any::<u64>(),
            proptest::option::of(any::<bool>()),
            any::<bool>(),
            any::<bool>(),
            frame(),
            frame(),
            proptest::collection::vec("[a-z_.]{1,8}", 0..4),
        )
            .prop_map(
                |(name, t_ns, found, blocked, probe, by, first_party, stack)| ImportAttempt {
                    name,
                    t_ns,
                    found,
                    blocked,
                    probe,
                    depth: Some(stack.len() as u32),
                    parent: stack.last().cloned(),
                    by: by.clone(),
                    first_party,
                    stack_by: stack.iter().map(|_| None).collect(),
                    stack,
                    thread: None,
                    error: None,
                    channel: Channel::Finder,
                    reified: false,
                    declared: None,
                    audit_t_ns: None,
                    file: by.as_ref().map(|f| f.file.clone()),
                    finder: found
                        .filter(|f| *f)
                        .map(|_| "importlib._bootstrap_external.PathFinder".to_owned()),
                },
            )
    }

    proptest! {
        #[test]
        fn any_bytes_parse_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let rec = Recording::parse(&bytes);
            prop_assert!(rec.imports.len() <= bytes.len());
        }

        #[test]
        fn records_round_trip_and_a_cut_keeps_the_whole_lines(
            attempts in proptest::collection::vec(attempt(), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut text = String::new();
            for a in &attempts {
                text.push_str(&serde_json::to_string(&Record::Import(a.clone())).unwrap());
                text.push('\n');
            }
            prop_assert_eq!(&Recording::parse(text.as_bytes()).imports, &attempts);
            // A crash cuts the file anywhere: every line before the cut survives.
            let at = cut.index(text.len());
            let whole = text[..at].matches('\n').count();
            let rec = Recording::parse(&text.as_bytes()[..at]);
            prop_assert_eq!(&rec.imports[..whole], &attempts[..whole]);
            prop_assert!(rec.imports.len() <= whole + 1);
        }
    }
}
