//! The installed command in a shell: `coldstart completions bash|zsh|fish`
//! (clap_complete), each run for real. bash: the script is sourced,
//! `complete -p` shows it registered, and its function completes a
//! subcommand and a flag. zsh: after `compinit`, sourcing registers
//! `_coldstart` for the command. fish: `complete -C` completes a subcommand
//! and a flag. zsh and fish are Debian packages that `cargo xtask test`
//! installs; there a missing one fails its test, and a plain `cargo test`
//! on a machine without it says NOT RUN (`test_interpreters::installed`).

use std::path::Path;
use std::process::Command;

use test_interpreters::installed;

use crate::support::{self, coldstart_bin};

fn completions(shell: &str) -> String {
    let out = support::coldstart(support::root())
        .args(["completions", shell])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn bash(script: &str) -> String {
    run(Path::new("bash"), &["--norc", "--noprofile", "-c", script])
}

#[test]
fn bash_sources_the_completions_and_completes_subcommands_and_flags() {
    let registered = bash(r#"source <("$COLDSTART" completions bash) && complete -p coldstart"#);
    assert!(registered.contains("-F _coldstart"), "{registered}");
    assert!(
        registered.trim_end().ends_with(" coldstart"),
        "{registered}"
    );

    let complete = |words: &str| {
        bash(&format!(
            r#"source <("$COLDSTART" completions bash)
COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMP_LINE="{words}"; COMP_POINT=${{#COMP_LINE}}
_coldstart coldstart "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#
        ))
    };
    let subcommands = complete("coldstart ch");
    assert_eq!(
        subcommands.lines().collect::<Vec<_>>(),
        ["check"],
        "{subcommands}"
    );
    let flags = complete("coldstart check --for");
    let flags: Vec<_> = flags.lines().collect();
    assert!(
        flags.contains(&"--forbid") && flags.contains(&"--format"),
        "{flags:?}"
    );
    let shells = complete("coldstart completions ''");
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.lines().any(|l| l == shell), "{shells}");
    }
}

#[test]
fn zsh_and_fish_scripts_name_the_command_and_its_subcommands() {
    let zsh = completions("zsh");
    assert!(zsh.starts_with("#compdef coldstart"), "{zsh}");
    let fish = completions("fish");
    for sub in ["check", "bench", "snapshot", "completions"] {
        assert!(zsh.contains(&format!("'{sub}:")), "zsh misses {sub}");
        assert!(fish.contains(&format!("-a \"{sub}\"")), "fish misses {sub}");
    }
}

fn run(shell: &Path, args: &[&str]) -> String {
    let out = Command::new(shell)
        .args(args)
        .env("COLDSTART", coldstart_bin())
        .output()
        .expect("the shell runs");
    assert!(
        out.status.success(),
        "{} {args:?}: {out:?}",
        shell.display()
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn zsh_registers_the_completion_function_for_the_command() {
    let Some(zsh) = installed("/usr/bin/zsh", "zsh registers the completion") else {
        return;
    };
    let out = run(
        zsh,
        &[
            "-f",
            "-c",
            r#"autoload -Uz compinit && compinit -u -D
source <("$COLDSTART" completions zsh)
print -r -- "${_comps[coldstart]}"
whence -w _coldstart"#,
        ],
    );
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["_coldstart", "_coldstart: function"],
        "{out}"
    );
}

#[test]
fn fish_completes_subcommands_and_flags() {
    let Some(fish) = installed("/usr/bin/fish", "fish completes") else {
        return;
    };
    let complete = |line: &str| {
        let out = run(
            fish,
            &[
                "--no-config",
                "-c",
                &format!(r#""$COLDSTART" completions fish | source; complete -C '{line}'"#),
            ],
        );
        out.lines()
            .map(|l| l.split('\t').next().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(complete("coldstart ch"), ["check"]);
    let flags = complete("coldstart check --for");
    assert!(
        flags.iter().any(|f| f == "--forbid") && flags.iter().any(|f| f == "--format"),
        "{flags:?}"
    );
}
