//! The installed command in a shell: `coldstart completions bash|zsh|fish`
//! (clap_complete). bash is run for real: the script is sourced, `complete
//! -p` shows it registered, and its function completes a subcommand and a
//! flag. zsh and fish are not on every machine (neither was where this was written),
//! so their scripts are held to naming the command and its subcommands.

use std::process::Command;

use crate::support::coldstart_bin;

fn completions(shell: &str) -> String {
    let out = Command::new(coldstart_bin())
        .args(["completions", shell])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn bash(script: &str) -> String {
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", script])
        .env("COLDSTART", coldstart_bin())
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{script}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
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
