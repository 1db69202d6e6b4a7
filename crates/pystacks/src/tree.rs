//! The process tree around a pid, from `/proc`: which processes a
//! command-line pattern selects (what `pgrep -f` is for), and the chain of
//! parents of a process, each with its command line, to say where a
//! worker sits (under which service, started by which shell); a tree's
//! descendants as they come and go ([`ProcessTree`]) and what each costs
//! ([`cpu_ns`], [`rss_bytes`]).

use std::fmt;

use crate::procfs;
pub use crate::procfs::ProcessTree;

/// The CPU time the kernel has counted for process `pid` (`utime + stime`
/// of `/proc/PID/stat`, ns, in clock ticks of 10 ms at the usual 100 Hz);
/// `None` when it is gone.
pub fn cpu_ns(pid: u32) -> Option<u64> {
    procfs::cpu_ns(pid)
}

/// The resident set size of process `pid` in bytes (`/proc/PID/statm`);
/// `None` when it is gone.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    procfs::rss_bytes(pid)
}

/// How many parents a chain holds at most (a loop in a changing table
/// cannot make it endless).
const MAX_CHAIN: usize = 64;

/// A process and its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessLabel {
    /// The process.
    pub pid: u32,
    /// Its command line, arguments joined by spaces (empty for a kernel
    /// thread or a zombie).
    pub command: String,
}

impl ProcessLabel {
    /// `pid` with its command line read now.
    pub fn of(pid: u32) -> ProcessLabel {
        ProcessLabel {
            pid,
            command: procfs::cmdline(pid),
        }
    }
}

/// How much of a command line a [`ProcessLabel`] shows.
const SHOWN_CHARS: usize = 80;

impl fmt::Display for ProcessLabel {
    /// `PID (command)`, the command cut to 80 characters (`...` marks a
    /// cut), or `PID` alone without a command line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.command.is_empty() {
            return write!(f, "{}", self.pid);
        }
        match self.command.char_indices().nth(SHOWN_CHARS) {
            Some((cut, _)) => write!(f, "{} ({}...)", self.pid, &self.command[..cut]),
            None => write!(f, "{} ({})", self.pid, self.command),
        }
    }
}

/// The parents of `pid`, its own parent first, up to the first process
/// (pid 1, or a container's first process). Empty when `pid` is gone.
pub fn parent_chain(pid: u32) -> Vec<ProcessLabel> {
    let mut chain = Vec::new();
    let mut at = pid;
    while chain.len() < MAX_CHAIN {
        match procfs::parent_of(at) {
            Some(parent) if parent != 0 && parent != at => {
                chain.push(ProcessLabel::of(parent));
                at = parent;
            }
            _ => break,
        }
    }
    chain
}

/// A pattern on command lines that is not a valid regular expression.
#[derive(Debug, thiserror::Error)]
#[error("{pattern:?} is not a valid pattern (a regular expression, as `pgrep -f` takes): {reason}")]
pub struct BadPattern {
    /// The pattern.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Every process whose command line the regular expression `pattern`
/// matches anywhere (as `pgrep -f PATTERN` selects), oldest pid first;
/// this process and its parents (the shell that runs the query, whose
/// command line holds the pattern too) are left out.
pub fn matching(pattern: &str) -> Result<Vec<ProcessLabel>, BadPattern> {
    let re = regex::Regex::new(pattern).map_err(|e| BadPattern {
        pattern: pattern.to_owned(),
        reason: e.to_string(),
    })?;
    let me = std::process::id();
    let mut asking: Vec<u32> = parent_chain(me).iter().map(|p| p.pid).collect();
    asking.push(me);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Ok(Vec::new());
    };
    let mut out: Vec<ProcessLabel> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| !asking.contains(pid) && !procfs::is_gone(*pid))
        .map(ProcessLabel::of)
        .filter(|p| !p.command.is_empty() && re.is_match(&p.command))
        .collect();
    out.sort_by_key(|p| p.pid);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_found_by_its_command_line_with_this_process_in_its_chain() {
        let marker = format!("pystacks-tree-marker-{}", std::process::id());
        let (mut child, _out) = crate::testing::shell("read line", &[&marker]);
        let found = matching(&format!("tree-marker-{}$", std::process::id()));
        let chain = parent_chain(child.id());
        let _ = child.kill();
        let _ = child.wait();
        let found = found.expect("a valid pattern");
        assert_eq!(
            found.iter().map(|p| p.pid).collect::<Vec<_>>(),
            [child.id()],
            "{found:?}"
        );
        assert!(found[0].command.contains(&marker));
        assert_eq!(chain[0].pid, std::process::id(), "{chain:?}");
        assert!(!chain[0].command.is_empty());
        assert_eq!(
            ProcessLabel {
                pid: 7,
                command: "sh x".into()
            }
            .to_string(),
            "7 (sh x)"
        );
        let long = ProcessLabel {
            pid: 1,
            command: "x".repeat(200),
        };
        assert_eq!(long.to_string(), format!("1 ({}...)", "x".repeat(80)));
    }

    #[test]
    fn the_asking_process_never_matches_itself_and_a_bad_pattern_says_why() {
        let me = std::process::id();
        let own = procfs::cmdline(me);
        let found = matching(&regex::escape(&own)).expect("valid");
        assert!(found.iter().all(|p| p.pid != me), "{found:?}");
        let err = matching("(unclosed").expect_err("invalid");
        assert!(err.to_string().contains("not a valid pattern"), "{err}");
    }

    #[test]
    fn a_gone_process_has_no_chain() {
        assert!(parent_chain(u32::MAX - 1).is_empty());
    }
}
