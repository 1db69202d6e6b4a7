//! The GitHub files coldstart ships, held to what can be checked without
//! GitHub: `action.yml` against the schema of action metadata and every
//! workflow under `.github/workflows/` against the schema of workflows
//! (check-jsonschema's vendored schemas, pinned in the test venv), and each
//! step's `run:` script parsed by the shell it names (`bash -n`, with every
//! `${{ ... }}` expression as a plain word). What needs GitHub itself (a
//! runner, maturin-action, the release upload) is not run here.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{root, venv_python};

/// check-jsonschema of the test venv on `files` with a vendored schema.
fn schema_check(schema: &str, files: &[PathBuf]) -> std::process::Output {
    let bin = venv_python().with_file_name("check-jsonschema");
    Command::new(&bin)
        .args(["--builtin-schema", schema])
        .args(files)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {}: {e}; run cargo xtask test once",
                bin.display()
            )
        })
}

fn workflows() -> Vec<PathBuf> {
    let dir = root().join(".github/workflows");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no workflow in {}", dir.display());
    files
}

#[test]
fn the_action_and_the_workflows_follow_githubs_schemas() {
    let action = schema_check("vendor.github-actions", &[root().join("action.yml")]);
    assert!(action.status.success(), "action.yml: {action:?}");
    let flows = schema_check("vendor.github-workflows", &workflows());
    assert!(flows.status.success(), "workflows: {flows:?}");

    // The check can fail: an action without `runs.using` is refused.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("action.yml");
    let text = std::fs::read_to_string(root().join("action.yml")).unwrap();
    let without = text.replace("using: composite", "usin: composite");
    assert_ne!(text, without, "action.yml is a composite action");
    std::fs::write(&broken, without).unwrap();
    let refused = schema_check("vendor.github-actions", &[broken]);
    assert!(!refused.status.success(), "{refused:?}");
}

/// Every `run:` script of `file` with the shell its step or job names
/// (bash by default), as NUL-separated `shell\x1fscript` records.
fn run_scripts(file: &Path) -> Vec<(String, String)> {
    let script = r#"
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
def steps(doc):
    if "runs" in doc:
        yield from ((s, None) for s in doc["runs"].get("steps", []))
    for job in (doc.get("jobs") or {}).values():
        shell = ((job.get("defaults") or {}).get("run") or {}).get("shell")
        yield from ((s, shell) for s in job.get("steps", []))
for step, shell in steps(doc):
    if "run" in step:
        sys.stdout.write((step.get("shell") or shell or "bash") + "\x1f" + step["run"] + "\0")
"#;
    let out = Command::new(venv_python())
        .args(["-c", script])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|r| !r.is_empty())
        .map(|r| {
            let (shell, body) = r.split_once('\x1f').unwrap();
            (shell.to_owned(), body.to_owned())
        })
        .collect()
}

/// `${{ expr }}` as one plain word, as GitHub substitutes it before the
/// shell reads the script.
fn without_expressions(script: &str) -> String {
    let mut out = String::new();
    let mut rest = script;
    while let Some(i) = rest.find("${{") {
        out.push_str(&rest[..i]);
        out.push_str("EXPR");
        rest = rest[i..].find("}}").map_or("", |j| &rest[i + j + 2..]);
    }
    out.push_str(rest);
    out
}

#[test]
fn every_run_script_parses_in_its_shell() {
    let mut files = workflows();
    files.push(root().join("action.yml"));
    let mut seen = 0;
    for file in &files {
        for (shell, script) in run_scripts(file) {
            let program = shell.split_whitespace().next().unwrap_or("bash");
            assert!(
                program == "bash" || program == "sh",
                "{}: a step runs in {shell}, which this test does not parse",
                file.display()
            );
            let out = Command::new(program)
                .args(["-n", "-c", &without_expressions(&script)])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: {program} -n refuses:\n{script}\n{}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            seen += 1;
        }
    }
    assert!(seen >= 3, "only {seen} run scripts found");
    // The parse can fail.
    let bad = Command::new("bash")
        .args(["-n", "-c", "if true; then echo"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

/// The action's check-and-diff step, run as GitHub runs it, with a
/// stand-in `coldstart` on PATH (a script that logs its arguments and
/// writes what each `--output` names): `diff` is measured once, its
/// annotations come from that run's stdout and its markdown from the same
/// run's `--output`, appended to the job summary; the step's exit code is
/// the worse of the two commands'.
#[test]
fn the_action_measures_diff_once_and_renders_it_twice() {
    let (_, script) = run_scripts(&root().join("action.yml"))
        .into_iter()
        .find(|(_, s)| s.contains("coldstart diff"))
        .expect("a step runs coldstart diff");
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = dir.path().join("calls.log");
    let stand_in = format!(
        r#"#!/usr/bin/env bash
echo "$*" >> {log:?}
while [ $# -gt 0 ]; do
  if [ "$1" = --output ]; then echo "markdown of this run" > "${{2#*=}}"; shift; fi
  shift
done
echo "::notice title=coldstart::annotation"
exit 1
"#
    );
    std::fs::write(bin.join("coldstart"), stand_in).unwrap();
    let mut perms = std::fs::metadata(bin.join("coldstart"))
        .unwrap()
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(bin.join("coldstart"), perms).unwrap();
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "earlier steps' summary\n").unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-e", "-c", &without_expressions(&script)])
        .env("PATH", path)
        .env("COLDSTART_BASE", "origin/main")
        .env("COLDSTART_ARGS", "")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("RUNNER_TEMP", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let calls = std::fs::read_to_string(&log).unwrap();
    let diffs: Vec<&str> = calls.lines().filter(|l| l.starts_with("diff")).collect();
    assert_eq!(diffs.len(), 1, "diff runs once: {calls}");
    assert!(
        diffs[0].contains("--format github") && diffs[0].contains("--output markdown="),
        "{calls}"
    );
    assert_eq!(
        calls.lines().filter(|l| l.starts_with("check")).count(),
        1,
        "{calls}"
    );
    assert_eq!(
        std::fs::read_to_string(&summary).unwrap(),
        "earlier steps' summary\nmarkdown of this run\n"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.matches("::notice").count(),
        2,
        "check's and diff's annotations: {stdout}"
    );
}
