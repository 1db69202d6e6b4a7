//! Every command's help, whole, as a snapshot through the one redaction
//! (`support::redactions`): a flag spelled two ways, a default changed or a
//! command added shows here as a diff to review (`cargo insta review`),
//! never as a fragment that still matches.

use crate::support;

/// `coldstart ARGS`, its stdout; it must succeed.
fn help(args: &[&str]) -> String {
    let dir = support::root();
    let out = support::printed(support::coldstart(dir).args(args).output().unwrap());
    assert!(out.status.success(), "coldstart {args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands the top-level help lists under `Commands:`.
fn subcommands(top: &str) -> Vec<String> {
    top.split("Commands:\n")
        .nth(1)
        .expect("the help lists its commands")
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_commands_help_is_snapshotted_whole() {
    let top = help(&["--help"]);
    let commands = subcommands(&top);
    assert!(commands.len() >= 13, "{commands:?} from\n{top}");
    support::redactions().bind(|| {
        insta::assert_snapshot!("help", top);
        for command in &commands {
            let text = help(&[command, "--help"]);
            // A command's own subcommands (`history record`, `history show`).
            let nested = if text.contains("Commands:\n") {
                subcommands(&text)
            } else {
                Vec::new()
            };
            insta::assert_snapshot!(format!("help_{command}"), text);
            for sub in nested {
                insta::assert_snapshot!(
                    format!("help_{command}_{sub}"),
                    help(&[command, &sub, "--help"])
                );
            }
        }
    });
}

#[test]
fn the_redaction_replaces_what_varies_and_keeps_the_rest() {
    let root = support::root().display().to_string();
    let tmp = std::env::temp_dir().join("coldstart-diff-1234/out.json");
    let text = format!(
        "ready 12.5 ms, exit after 1.2 s; 3 processes, pid 48213 on 127.0.0.1:39001\n\
         {py} -m w, pid: 48213, {{\"pid\": 48213, \"port\": 39001, \"t_ns\": 5612}}\n\
         peak 45.1 MiB at {root}/tests/fixtures/a.py:3 and {}\n\
         process 1 of 2, 15 modules, torch (1 module), read by Python 3.15.0a2+ (main)\n\
         by package:\n       12.5 ms  re (5 modules)\n        9.0 ms  json (4 modules)\n\
         cost:  1.7 ms cumulative\n\
         HEAD~1 = b1eee2c81a36 (given); at 9f1c2d3e4b5a6978800112233445566778899aab; {}; 0x7ffe12345678\n\
         placement: workers not pinned (CPUs 0,1 available); CPUs 0-3 available\n\
         harness: 1.00 s of wall time for 0.93 s of worker lifecycles (1.162x)\n\
         warning: some task waited for a CPU during 19.4% of the run (/proc/pressure/cpu); other work\n\
         warning: the 1-minute load average was 5.43 at the end of the run, over the 2 CPUs\n\
         warning: 3 of 3 trials failed\n\
         Parent chain: 18770 (sh x.sh) < 17378 (it --exact) < 1 (init)\n\
         tcp-worker[20263] starting; [123]\n",
        tmp.display(),
        tmp.parent().unwrap().display(),
        py = support::python().display(),
    );
    let redacted = support::redact(&text);
    assert_eq!(
        redacted,
        "ready [DURATION], exit after [DURATION]; 3 processes, pid [PID] on 127.0.0.1:[PORT]\n\
         [PYTHON] -m w, pid: [PID], {\"pid\": [PID], \"port\": [PORT], \"t_ns\": [NS]}\n\
         peak [SIZE] at [ROOT]/tests/fixtures/a.py:3 and [TMP]\n\
         process 1 of 2, 15 modules, torch (1 module), read by Python [VERSION] (main)\n\
         by package:\n  [RANKED BY TIME]\n\
         cost:  [DURATION] cumulative\n\
         HEAD~1 = [COMMIT] (given); at [COMMIT]; [TMP]; 0x7ffe12345678\n\
         placement: workers not pinned (CPUs [CPUS] available); CPUs [CPUS] available\n\
         harness: [DURATION] of wall time for [DURATION] of worker lifecycles ([RATIO])\n\
         warning: 3 of 3 trials failed\n\
         Parent chain: [PID] (sh x.sh) < [PID] (it --exact) < 1 (init)\n\
         tcp-worker[[PID]] starting; [123]\n"
    );
}

#[test]
fn a_bad_duration_count_or_share_is_refused_with_what_to_write() {
    let dir = support::root();
    let mut text = String::new();
    for args in [
        &["check", "--processes", "0", "--", "true"][..],
        &["check", "--ready-timeout", "soon", "--", "true"],
        &["profile", "--request-timeout", "0", "--", "true"],
        &["dump", "--timeout", "0", "1"],
        &[
            "trace",
            "--duration",
            "inf",
            "--output",
            "perfetto=t.pb",
            "--",
            "true",
        ],
        &["diff", "--instrumented", "0"],
        &["bench", "--noise-threshold", "150%"],
    ] {
        let out = support::coldstart(dir).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "coldstart {args:?}");
        assert!(out.stdout.is_empty(), "coldstart {args:?}");
        text += &format!(
            "$ coldstart {}\n{}\n",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    support::redactions().bind(|| insta::assert_snapshot!(text));
}
