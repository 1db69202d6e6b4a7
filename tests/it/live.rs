//! `coldstart dump`, `top` and `record` on processes coldstart did not
//! start, run as a user runs them (the installed binary, from a folder
//! outside the workspace): a stand-in parent that is not Python (a shell
//! script, where the Rust service would be) with two Python workers, one
//! blocked in a named function and one busy in a named loop; a worker that
//! forks; a process the kernel does not let us read. Every process a test
//! starts is killed and reaped, and its end awaited.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use crate::support;

/// Bounds a hang only.
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

fn fixture(name: &str) -> PathBuf {
    support::fixtures().join("live").join(name)
}

/// A tag unique to one test, put on its workers' command lines, so
/// `--match` never meets another test's processes.
fn tag(test: &str) -> String {
    format!("coldstart-live-{test}-{}", std::process::id())
}

/// A process tree the test started: the leader in its own process group,
/// its stdout lines on a channel; stdin closed, the group killed, the
/// leader reaped and every process it announced awaited on drop.
pub(crate) struct Tree {
    leader: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    announced: Vec<u32>,
}

impl Tree {
    fn start(mut cmd: Command) -> Tree {
        let mut leader = cmd
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("the fixture starts");
        let stdout = leader.stdout.take().expect("piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Tree {
            stdin: leader.stdin.take(),
            leader,
            lines: rx,
            announced: Vec::new(),
        }
    }

    /// The stand-in parent (`sh standin_parent.sh PYTHON TAG`) and its two
    /// workers: (tree, blocked worker's pid, busy worker's pid).
    fn standin(tag: &str) -> (Tree, u32, u32) {
        match Tree::two_workers("standin_parent.sh", tag) {
            (tree, [(a, blocked), (b, busy)]) if a == "blocked" && b == "busy" => {
                (tree, blocked, busy)
            }
            (_, other) => panic!("unexpected ready lines: {other:?}"),
        }
    }

    /// `sh SCRIPT PYTHON TAG`, a stand-in parent that starts two workers:
    /// the tree and the workers' ready lines, (name, pid) by name.
    fn two_workers(script: &str, tag: &str) -> (Tree, [(String, u32); 2]) {
        let mut cmd = Command::new("sh");
        cmd.arg(fixture(script)).arg(support::python()).arg(tag);
        let mut tree = Tree::start(cmd);
        let first = tree.ready();
        let second = tree.ready();
        let mut by_name = [first, second];
        by_name.sort();
        (tree, by_name)
    }

    /// The next `NAME ready PID` line.
    fn ready(&mut self) -> (String, u32) {
        let line = self
            .lines
            .recv_timeout(LINE_TIMEOUT)
            .unwrap_or_else(|e| panic!("no ready line from the fixture: {e}"));
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts[..] {
            [name, "ready", pid] => {
                let pid = pid.parse().expect("a pid");
                self.announced.push(pid);
                (name.to_owned(), pid)
            }
            _ => panic!("not a ready line: {line:?}"),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.leader.id()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.stdin = None;
        // SAFETY: kill(2) on the group of a leader we started and have not
        // reaped yet (ESRCH is harmless).
        unsafe { libc::kill(-(self.leader.id() as i32), libc::SIGKILL) };
        let _ = self.leader.wait();
        for pid in &self.announced {
            if !support::wait_until_gone(*pid, LINE_TIMEOUT) && !std::thread::panicking() {
                panic!("process {pid} is left running");
            }
        }
    }
}

use support::stdout as stdout_of;

#[test]
fn dump_of_the_standin_parent_shows_both_workers_their_functions_and_the_parent_chain() {
    let (tree, blocked, busy) = Tree::standin(&tag("dump"));
    let cwd = tempfile::tempdir().unwrap();
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["dump", &tree.pid().to_string()])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The whole dump: the parent (a shell: not Python, its one thread
    // idle, not unwound), each worker with its parent chain, its threads
    // and where they are, then the parent's summary, which makes no claim
    // that it waits on a worker (the shell waits in wait4, on no pipe).
    // Above the stand-in parent, the chain is this suite's own processes.
    let suite = regex::Regex::new(&format!(r"{} \([^\n]*", std::process::id())).unwrap();
    let text = suite.replace_all(&text, "[THE SUITE]");
    // A command in a chain is cut at a width, here inside the
    // interpreter's path.
    let cut = regex::Regex::new(r"\(sh [^()\n]*\.\.\.\)").unwrap();
    let text = cut.replace_all(&text, "(sh [COMMAND]...)");
    // The busy loop is read on either of its two lines.
    let text = text
        .replace(&tag("dump"), "[TAG]")
        .replace("(busy_worker.py:21)", "(busy_worker.py:[LOOP])")
        .replace("(busy_worker.py:22)", "(busy_worker.py:[LOOP])");
    support::redactions().bind(|| insta::assert_snapshot!("dump_standin_parent", text));
    let _ = (blocked, busy);

    // The same as JSON.
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["dump", "--format", "json", &tree.pid().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "coldstart.dump/1");
    let processes = doc["processes"].as_array().unwrap();
    let of = |pid: u32| {
        processes
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap_or_else(|| panic!("{pid} missing: {doc}"))
    };
    assert_eq!(of(blocked)["parent_chain"][0]["pid"], tree.pid());
    assert_eq!(
        of(blocked)["threads"][0]["frames"][0]["name"],
        "wait_for_the_model_request"
    );
    assert_eq!(of(blocked)["threads"][0]["status"], "idle");
    // Its threads were read: no "not a Python process" error.
    assert!(of(tree.pid())["error"].is_null(), "{doc}");
    let parent = &of(tree.pid())["native"];
    assert_eq!(parent["unwound"], false, "{parent}");
    assert_eq!(parent["threads"][0]["name"], "sh", "{parent}");
    let wait = &doc["parent_wait"];
    assert_eq!(wait["pid"], tree.pid(), "{wait}");
    let busy_worker = wait["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["pid"] == busy)
        .unwrap_or_else(|| panic!("{busy} missing: {wait}"));
    assert_eq!(busy_worker["busy"], true, "{wait}");
    assert_eq!(wait["waits"], serde_json::json!([]), "{wait}");
    let busy_names: Vec<&str> = of(busy)["threads"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["frames"].as_array().unwrap())
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert!(busy_names.contains(&"tokenize_in_a_loop"), "{busy_names:?}");
}

#[test]
fn match_selects_workers_by_command_line() {
    let tag = tag("match");
    let (_tree, blocked, busy) = Tree::standin(&tag);
    let cwd = tempfile::tempdir().unwrap();
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["dump", "--match", &format!("busy_worker\\.py {tag}$")])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("Process {busy}: ")), "{text}");
    assert!(text.contains("tokenize_in_a_loop"), "{text}");
    assert!(!text.contains(&format!("Process {blocked}: ")), "{text}");
    // Both workers by their shared tag.
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["dump", "--match", &format!("_worker\\.py {tag}$")])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(text.contains("tokenize_in_a_loop"), "{text}");
    assert!(text.contains("wait_for_the_model_request"), "{text}");
    // Nothing matches: an error that says so.
    support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["dump", "--match", &format!("{tag}-matches-nothing")])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no running process"));
}

/// The Rust dispatcher fixture (tokio; see
/// `tests/fixtures/trace/dispatcher`) holding a request to a worker that
/// stalls: `dump` says the dispatcher waits on that worker, naming the
/// blocking thread that reads its pipe, shows the worker's stall, and
/// claims no wait on the other worker once its reply is in.
#[test]
fn dump_says_the_rust_dispatcher_waits_on_the_worker_that_stalls() {
    let mut cmd = Command::new(support::dispatcher_bin());
    cmd.arg(support::python())
        .arg(support::fixtures().join("trace/dispatch_worker.py"))
        .arg("--hold");
    let mut tree = Tree::start(cmd);
    let line = |prefix: &str| -> Vec<u32> {
        loop {
            let l = tree
                .lines
                .recv_timeout(LINE_TIMEOUT)
                .unwrap_or_else(|e| panic!("no {prefix:?} line: {e}"));
            if let Some(rest) = l.strip_prefix(prefix) {
                return rest
                    .split_whitespace()
                    .map(|p| p.parse().unwrap())
                    .collect();
            }
        }
    };
    let workers = line("workers ");
    let stalled = line("stalling: worker ")[0];
    let other = *workers.iter().find(|w| **w != stalled).unwrap();
    tree.announced.extend(&workers);
    let cwd = tempfile::tempdir().unwrap();
    let pid = tree.pid();
    // The request is written before its reply is read, and the other
    // worker's request lasts a moment: each dump is one look, taken again
    // (a bounded number of times) until both hold.
    let (waits, no_other) = (
        format!("Process {pid} waits on worker {stalled}: its thread "),
        format!("waits on worker {other}"),
    );
    let mut text = String::new();
    for _ in 0..30 {
        let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
            .args(["dump", &pid.to_string()])
            .output()
            .unwrap();
        text = stdout_of(&out);
        assert!(out.status.success(), "{text}");
        if text.contains(&waits) && !text.contains(&no_other) {
            break;
        }
    }
    println!("{text}");
    assert!(text.contains(&waits), "{text}");
    assert!(!text.contains(&no_other), "{text}");
    let says = text.lines().find(|l| l.contains(&waits)).unwrap();
    assert!(says.contains("\"dispatch-"), "{says}");
    assert!(
        says.ends_with(&format!("a pipe worker {stalled} writes to.")),
        "{says}"
    );
    assert!(
        text.contains("stall_in_model_download (dispatch_worker.py:"),
        "{text}"
    );
}

#[test]
fn dump_says_a_parent_waits_on_a_worker_only_where_it_reads_that_workers_pipe() {
    let (tree, workers) = Tree::two_workers("pipe_parent.sh", &tag("pipe"));
    let [(b, blocked), (p, piped)] = workers;
    assert_eq!((b.as_str(), p.as_str()), ("blocked", "piped"));
    let cwd = tempfile::tempdir().unwrap();
    let pid = tree.pid();
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["dump", &pid.to_string()])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(out.status.success(), "{text}");
    println!("{text}");
    assert!(
        text.contains(&format!(
            "Process {pid} waits on worker {piped}: its thread {pid} \"sh\" is blocked reading fd "
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("a pipe worker {piped} writes to.")),
        "{text}"
    );
    assert!(
        !text.contains(&format!("waits on worker {blocked}")),
        "{text}"
    );
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["dump", "--json", &pid.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let waits = doc["parent_wait"]["waits"].as_array().unwrap();
    assert_eq!(waits.len(), 1, "{doc}");
    assert_eq!(waits[0]["worker"], piped, "{doc}");
    assert_eq!(waits[0]["thread"], pid, "{doc}");
}

/// A record's error when every thread it read was idle names what it
/// read: the Python threads of the workers below a shell that is not
/// Python, not "every Python thread" of the shell.
#[test]
fn record_of_an_idle_tree_under_a_parent_that_is_not_python_says_what_it_read() {
    let (tree, workers) = Tree::two_workers("pipe_parent.sh", &tag("idle-tree"));
    let [(_, blocked), (_, piped)] = workers;
    let cwd = tempfile::tempdir().unwrap();
    let pid = tree.pid();
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["record", &pid.to_string(), "--subprocesses"])
        .args(["--duration", "1", "--format", "collapsed", "-o", "idle.txt"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        !stderr.contains(&format!("every Python thread of process {pid}")),
        "{stderr}"
    );
    let (lo, hi) = (blocked.min(piped), blocked.max(piped));
    assert!(
        stderr.contains(&format!(
            "no sample was taken: every thread read (the Python threads of processes {lo}, {hi}) was idle"
        )),
        "{stderr}"
    );
}

/// A process's CPU time so far as the kernel counts it (`utime + stime`
/// of `/proc/PID/stat`), in ms.
fn kernel_cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks * 1000.0 / hz
}

/// The time the process's threads spent runnable but waiting for a CPU
/// so far (the second field of each `/proc/PID/task/TID/schedstat`), in
/// ms: a sampler sees such a thread running (`R`) though it gets no CPU.
fn run_queue_wait_ms(pid: u32) -> f64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok())
        .sum::<f64>()
        / 1e6
}

/// The number that ends just before `suffix` in `line` (`... (4.9 Hz
/// used)` with ` Hz used`).
fn number_before(line: &str, suffix: &str) -> f64 {
    let head = &line[..line
        .find(suffix)
        .unwrap_or_else(|| panic!("no {suffix:?} in {line:?}"))];
    let number = head.rsplit([' ', '(']).next().unwrap_or_default();
    number
        .parse()
        .unwrap_or_else(|_| panic!("no number before {suffix:?} in {line:?}"))
}

/// The table's header of `text`: `N samples in R rounds over S s (H Hz
/// used): C on CPU, about M ms of CPU time[; I idle (not CPU time)]`.
fn table_header(text: &str) -> &str {
    text.lines()
        .find(|l| l.contains(" ms of CPU time"))
        .unwrap_or_else(|| panic!("no CPU figure:\n{text}"))
}

/// `coldstart record ARGS` of `pid` beside the kernel's count of its CPU
/// time: asserts that the figure printed agrees with the kernel's within
/// the stated tolerance, and returns (rate used, figure, kernel's).
///
/// The tolerance: 15% of the kernel's figure, plus two sampling periods
/// at the rate used (a sample stands for a period), plus the CPU time the
/// kernel counted outside the sampled window (the command's run less its
/// sampling, at most), plus, above it only, the time the process's threads
/// waited runnable for a CPU (a sampler counts a runnable thread as on
/// CPU: a loaded machine).
fn assert_cpu_figure_agrees_with_the_kernel(
    cwd: &Path,
    pid: u32,
    args: &[&str],
) -> (f64, f64, f64) {
    let (cpu0, wait0) = (kernel_cpu_ms(pid), run_queue_wait_ms(pid));
    let started = std::time::Instant::now();
    let out = support::coldstart_bounded(cwd, LINE_TIMEOUT)
        .args(["record", &pid.to_string()])
        .args(args)
        .output()
        .unwrap();
    let run_ms = started.elapsed().as_secs_f64() * 1000.0;
    let (cpu1, wait1) = (kernel_cpu_ms(pid), run_queue_wait_ms(pid));
    let text = stdout_of(&out);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    let header = table_header(&text);
    let (rate, figure) = (
        number_before(header, " Hz used"),
        number_before(header, " ms of CPU time"),
    );
    let sampled_s = number_before(header, " s (");
    let kernel = cpu1 - cpu0;
    let outside = (run_ms - sampled_s * 1000.0).max(0.0);
    let slack = 0.15 * kernel + 2000.0 / rate.max(0.1);
    let (low, high) = (kernel - slack - outside, kernel + slack + (wait1 - wait0));
    assert!(
        figure >= low && figure <= high,
        "about {figure:.0} ms of CPU printed; the kernel counted {kernel:.0} ms (accepted {low:.0} to {high:.0} ms)\n{text}"
    );
    // The kernel's own count over the sampled rounds, printed beside: inside
    // ours (which spans the whole command), short of it by at most what
    // ran outside the sampled window, each side within a tick or two.
    let counted = header
        .find("; the kernel counted ")
        .map(|at| number_before(&header[at..], " ms"))
        .unwrap_or_else(|| panic!("no count of the kernel's in {header:?}"));
    assert!(
        counted <= kernel + 20.0 && counted >= kernel - outside - 20.0,
        "the kernel counted {counted:.0} ms as printed, {kernel:.0} ms around the command (outside the window: {outside:.0} ms)\n{text}"
    );
    (rate, figure, kernel)
}

#[test]
fn record_at_a_low_rate_with_idle_threads_prints_the_cpu_time_the_kernel_counts() {
    let (_tree, blocked, busy) = Tree::standin(&tag("cpu"));
    let cwd = tempfile::tempdir().unwrap();
    // The busy worker: its loop on CPU, its watchdog thread idle (kept
    // by --idle, and no CPU time).
    let args = [
        "--rate",
        "5",
        "--idle",
        "--duration",
        "3",
        "--format",
        "collapsed",
        "-o",
        "busy.txt",
    ];
    let (rate, figure, kernel) = assert_cpu_figure_agrees_with_the_kernel(cwd.path(), busy, &args);
    assert!((3.0..=5.5).contains(&rate), "the rate used: {rate}");
    println!(
        "busy at --rate 5 --idle: {rate:.1} Hz used, about {figure:.0} ms printed, {kernel:.0} ms counted by the kernel"
    );
    // The blocked worker: every thread idle, every sample idle: no CPU.
    let args = [
        "--rate",
        "20",
        "--idle",
        "--duration",
        "1",
        "--format",
        "collapsed",
        "-o",
        "idle.txt",
    ];
    let (rate, figure, kernel) =
        assert_cpu_figure_agrees_with_the_kernel(cwd.path(), blocked, &args);
    println!(
        "idle at --rate 20 --idle: {rate:.1} Hz used, about {figure:.0} ms printed, {kernel:.0} ms counted by the kernel"
    );
    assert_eq!(figure, 0.0, "idle samples are no CPU time");
}

/// `top` at a low rate: its header states the rate used, and the CPU
/// time of a process busy on one thread is about the refresh's length
/// (not the samples over the asked rate, nor its idle thread's).
#[test]
fn top_at_a_low_rate_states_the_rate_used_and_counts_no_idle_thread() {
    let (_tree, _blocked, busy) = Tree::standin(&tag("top-rate"));
    let cwd = tempfile::tempdir().unwrap();
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args([
            "top",
            &busy.to_string(),
            "-n",
            "2",
            "--rate",
            "10",
            "--idle",
        ])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(out.status.success(), "{text}");
    let last = text.rsplit("coldstart top:").next().unwrap_or_default();
    let header = table_header(last);
    assert!(header.contains(" idle (not CPU time)"), "{header}");
    let (rate, figure) = (
        number_before(header, " Hz used"),
        number_before(header, " ms of CPU time"),
    );
    assert!((5.0..=11.0).contains(&rate), "{header}");
    // One thread on CPU over the refresh: at most its length (10% and two
    // periods of slack), never the two threads' samples over the rate.
    let seconds = number_before(header, " s (");
    assert!(figure <= seconds * 1000.0 * 1.1 + 2000.0 / rate, "{header}");
}

/// Every `<title>` of an inferno flame graph as (frame, samples).
fn svg_frames(svg: &str) -> Vec<(String, u64)> {
    let xml = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(svg, xml).expect("well-formed");
    doc.descendants()
        .filter(|n| n.has_tag_name("title"))
        .filter_map(|n| {
            let t = n.text()?;
            let (frame, rest) = t.rsplit_once(" (")?;
            let samples = rest.split_whitespace().next()?.replace(',', "");
            Some((frame.to_owned(), samples.parse().ok()?))
        })
        .collect()
}

#[test]
fn record_for_two_seconds_writes_a_flame_graph_whose_widest_frame_is_the_loop() {
    let (_tree, _blocked, busy) = Tree::standin(&tag("record"));
    let cwd = tempfile::tempdir().unwrap();
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["record", &busy.to_string(), "--duration", "2", "-o"])
        .arg("busy.svg")
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("the duration passed"), "{text}");
    let svg = std::fs::read_to_string(cwd.path().join("busy.svg")).unwrap();
    support::assert_well_formed_svg(&svg);
    let frames = svg_frames(&svg);
    let widest = frames
        .iter()
        .filter(|(f, _)| f != "all")
        .map(|(_, n)| *n)
        .max()
        .unwrap_or_else(|| panic!("no frame in the flame graph: {frames:?}"));
    let the_loop = frames
        .iter()
        .find(|(f, _)| f.starts_with("tokenize_in_a_loop (busy_worker.py"))
        .unwrap_or_else(|| panic!("no loop frame: {frames:?}"));
    assert_eq!(the_loop.1, widest, "{frames:?}");
}

/// A recording that cannot start (its process is gone) leaves its output
/// path as it was: no file where there was none, an existing file's
/// content kept.
#[test]
fn a_record_that_cannot_start_leaves_its_output_path_as_it_was() {
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let pid = gone.id().to_string();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("kept.svg"), "an earlier recording").unwrap();
    for extra in [&[][..], &["-o", "kept.svg"], &["-o", "new/folder/rec.svg"]] {
        let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
            .args(["record", &pid])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains("is not running"), "{extra:?}: {err}");
    }
    let left: Vec<String> = std::fs::read_dir(cwd.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["kept.svg"], "nothing created, no folder left");
    assert_eq!(
        std::fs::read_to_string(cwd.path().join("kept.svg")).unwrap(),
        "an earlier recording"
    );
}

#[test]
fn record_stopped_by_sigterm_writes_what_it_sampled() {
    let (_tree, _blocked, busy) = Tree::standin(&tag("sigterm"));
    let cwd = tempfile::tempdir().unwrap();
    let mut rec = crate::support::coldstart(cwd.path())
        .args(["record", &busy.to_string(), "--format", "collapsed", "-o"])
        .arg("busy.txt")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It says it records once the sampler is attached.
    let mut line = String::new();
    BufReader::new(rec.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("recording process"), "{line}");
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(rec.id() as i32, libc::SIGTERM) };
    let out = rec.wait_with_output().unwrap();
    let text = stdout_of(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("stopped by SIGTERM"), "{text}");
    let collapsed = std::fs::read_to_string(cwd.path().join("busy.txt")).unwrap();
    assert!(
        collapsed
            .lines()
            .any(|l| l.contains("tokenize_in_a_loop (busy_worker.py")),
        "{collapsed}"
    );
}

#[test]
fn top_prints_two_refreshes_that_name_the_loop() {
    let (_tree, _blocked, busy) = Tree::standin(&tag("top"));
    let cwd = tempfile::tempdir().unwrap();
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["top", &busy.to_string(), "-n", "2"])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(out.status.success(), "{text}");
    let refreshes: Vec<&str> = text.split("coldstart top:").skip(1).collect();
    assert_eq!(refreshes.len(), 2, "{text}");
    for r in refreshes {
        let first_row = r
            .lines()
            .skip_while(|l| !l.ends_with("frame"))
            .nth(1)
            .unwrap_or_default();
        assert!(first_row.contains("tokenize_in_a_loop"), "{r}");
    }
    assert!(!text.contains('\x1b'), "plain text, no terminal codes");
}

#[test]
fn subprocesses_follows_a_forked_child() {
    let tag = tag("fork");
    let mut cmd = Command::new(support::python());
    cmd.arg(fixture("forking_worker.py")).arg(&tag);
    let mut tree = Tree::start(cmd);
    let mut ready = [tree.ready(), tree.ready()];
    ready.sort();
    let [(_, child), (_, parent)] = ready;
    assert_eq!(parent, tree.pid());
    let cwd = tempfile::tempdir().unwrap();
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["record", &parent.to_string(), "--subprocesses"])
        .args(["--duration", "2", "--format", "collapsed", "-o", "tree.txt"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stdout_of(&out));
    let collapsed = std::fs::read_to_string(cwd.path().join("tree.txt")).unwrap();
    let child_label = format!("process {child}:");
    assert!(
        collapsed.lines().any(|l| l.contains(&child_label)
            && l.contains("spin_in_the_forked_child (forking_worker.py")),
        "{collapsed}"
    );
    // Without --subprocesses, the waiting parent alone (idle: no samples).
    let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["record", &parent.to_string(), "--idle", "--duration", "1"])
        .args(["--format", "collapsed", "-o", "parent.txt"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stdout_of(&out));
    let alone = std::fs::read_to_string(cwd.path().join("parent.txt")).unwrap();
    assert!(!alone.contains("spin_in_the_forked_child"), "{alone}");
}

/// `coldstart ARGS` on `pid` without the right to read it: exit 2, and
/// the error says what to allow.
fn assert_refused_without_ptrace_rights(cwd: &Path, pid: &str, args: &[&str]) {
    let out = support::coldstart_run(cwd, args, &[], &[support::Env::WithoutPtraceRights]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    for words in [
        format!("the kernel does not let this process read the memory of process {pid}"),
        "PR_SET_DUMPABLE".to_owned(),
        "CAP_SYS_PTRACE".to_owned(),
    ] {
        assert!(
            stderr.contains(&words),
            "{args:?}: {words:?} missing: {stderr}"
        );
    }
}

#[test]
fn a_process_the_kernel_will_not_let_us_read_gives_the_permission_error() {
    let mut cmd = Command::new(support::python());
    // The stack reader's own non-dumpable target, one file for both suites.
    cmd.arg(support::root().join("crates/pystacks/tests/fixtures/protected.py"))
        .arg("not-dumpable");
    let tree = Tree::start(cmd);
    let line = tree.lines.recv_timeout(LINE_TIMEOUT).expect("ready");
    assert_eq!(line, "ready");
    let pid = tree.pid().to_string();
    let cwd = tempfile::tempdir().unwrap();
    for args in [
        vec!["dump", &pid],
        vec!["record", &pid, "--duration", "1", "-o", "x.svg"],
        vec!["top", &pid, "-n", "1"],
    ] {
        assert_refused_without_ptrace_rights(cwd.path(), &pid, &args);
    }
    // Left alone: not stopped, not traced.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("TracerPid:\t0"), "{status}");
    assert!(!status.contains("State:\tT"), "{status}");
}

/// Run by a build without the `native` features (`cargo nextest run`);
/// `cargo xtask test` builds the suite with them, and checks this on the
/// wheel's coldstart instead (`user_project`).
#[cfg(not(feature = "native"))]
#[test]
fn native_on_a_build_without_the_feature_says_how_to_get_it() {
    let (_tree, _blocked, busy) = Tree::standin(&tag("native"));
    let cwd = tempfile::tempdir().unwrap();
    support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
        .args(["dump", "--native", &busy.to_string()])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("libunwind-dev"))
        .stderr(predicates::str::contains("--features native"));
}

/// With native stacks (this crate's `native` feature: the coldstart run is
/// built with its own; `cargo xtask test` builds the suite with both): the
/// example service, a tokio pool of two Python workers
/// kept busy, read whole; a Rust process busy in a function of its own.
#[cfg(feature = "native")]
pub(crate) mod native_stacks {
    use super::*;

    impl Tree {
        /// The next line, which must start with `prefix`.
        fn line(&mut self, prefix: &str) -> String {
            let line = self
                .lines
                .recv_timeout(LINE_TIMEOUT)
                .unwrap_or_else(|e| panic!("no {prefix:?} line: {e}"));
            assert!(line.starts_with(prefix), "not a {prefix:?} line: {line:?}");
            line
        }
    }

    /// `ml-service --serve`: (tree, its workers' pids) once it serves.
    pub(crate) fn service() -> (Tree, Vec<u32>) {
        let mut cmd = Command::new(support::example_service_bin());
        cmd.arg("--serve");
        let mut tree = Tree::start(cmd);
        // The workers' ready lines come first.
        let serving = loop {
            let line = tree
                .lines
                .recv_timeout(LINE_TIMEOUT)
                .unwrap_or_else(|e| panic!("the service never served: {e}"));
            if line.starts_with("serving:") {
                break line;
            }
        };
        // `serving: service PID, workers A B`
        let workers: Vec<u32> = serving
            .split_once("workers ")
            .expect("a workers list")
            .1
            .split_whitespace()
            .map(|p| p.parse().expect("a pid"))
            .collect();
        assert_eq!(workers.len(), 2, "{serving}");
        tree.announced.extend(&workers);
        (tree, workers)
    }

    #[test]
    fn dump_native_of_the_service_shows_its_own_and_tokio_frames_and_the_workers_python() {
        let (tree, workers) = service();
        let cwd = tempfile::tempdir().unwrap();
        let pid = tree.pid().to_string();
        let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
            .args(["dump", &pid, "--native"])
            .output()
            .unwrap();
        let text = stdout_of(&out);
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        println!("{text}");
        assert!(text.contains("stopped while unwound"), "{text}");
        // The service's own crate and tokio, with files and lines.
        assert!(text.contains("ml_service::"), "{text}");
        assert!(text.contains("(service/src/main.rs:"), "{text}");
        assert!(text.contains("(tokio-"), "{text}");
        assert!(text.contains("\"tokio-rt-worker\""), "{text}");
        assert!(text.contains("frames [unknown]"), "{text}");
        // Each worker's Python frames, in the same report.
        for w in &workers {
            assert!(text.contains(&format!("Process {w}: ")), "{text}");
        }
        assert!(text.contains("(mlworker/__main__.py:"), "{text}");
        assert!(
            text.contains(&format!("Process {pid}'s threads: ")),
            "{text}"
        );
        // Its `spawn-stdout-PID` threads read each worker's output pipe:
        // a wait on each worker, proven.
        for w in &workers {
            assert!(
                text.contains(&format!("Process {pid} waits on worker {w}: its thread ")),
                "{text}"
            );
        }
        assert!(!text.contains("While process"), "{text}");

        let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
            .args(["dump", &pid, "--native", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["schema"], "coldstart.dump/1");
        let parent = &doc["processes"][0]["native"];
        assert_eq!(parent["unwound"], true, "{parent}");
        let main = &parent["threads"][0];
        assert_eq!(main["os_thread_id"], tree.pid(), "{main}");
        assert!(
            main["frames"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["name"] == "ml_service::main"),
            "{main}"
        );
        assert_eq!(doc["parent_wait"]["workers"].as_array().unwrap().len(), 2);
        assert!(doc["processes"][0]["error"].is_null(), "{doc}");
    }

    #[test]
    fn record_native_of_the_service_writes_both_halves_in_one_svg_and_one_speedscope_file() {
        let (tree, workers) = service();
        let cwd = tempfile::tempdir().unwrap();
        let pid = tree.pid().to_string();
        let record = |format: &str, file: &str| {
            let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
                .args(["record", &pid, "--native", "--subprocesses", "--idle"])
                .args(["--duration", "2", "--format", format, "-o", file])
                .output()
                .unwrap();
            let text = stdout_of(&out);
            assert!(
                out.status.success(),
                "{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("each process is stopped"),
                "the stop is said"
            );
            std::fs::read_to_string(cwd.path().join(file)).unwrap()
        };
        let svg = record("flamegraph", "both.svg");
        support::assert_well_formed_svg(&svg);
        let roots: Vec<String> = svg_frames(&svg)
            .into_iter()
            .map(|(f, _)| f)
            .filter(|f| f.starts_with("process "))
            .collect();
        // The service and each worker: roots side by side.
        let each_process_a_root = |roots: &[&str]| {
            let all = std::iter::once(pid.clone()).chain(workers.iter().map(|w| w.to_string()));
            for p in all {
                let root = format!("process {p}:");
                assert!(
                    roots.iter().any(|r| r.starts_with(&root)),
                    "{root} in {roots:?}"
                );
            }
        };
        each_process_a_root(&roots.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(svg.contains("ml_service::"), "the service's own frames");
        assert!(svg.contains("mlworker/__main__.py"), "the workers' frames");

        let speedscope = record("speedscope", "both.speedscope.json");
        let doc: serde_json::Value = serde_json::from_str(&speedscope).unwrap();
        let names: Vec<&str> = doc["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        each_process_a_root(&names);
    }

    /// The case of a worker whose start-up is sampled with `--native`
    /// (py-spy's unwinding costs milliseconds a read, so the rate is
    /// lowered): the CPU time printed is the kernel's, within the stated
    /// tolerance, not the samples over the asked 100 Hz.
    #[test]
    fn record_native_of_a_busy_worker_at_the_lowered_rate_prints_the_cpu_time_the_kernel_counts() {
        let (_tree, _blocked, busy) = Tree::standin(&tag("native-cpu"));
        let cwd = tempfile::tempdir().unwrap();
        let args = [
            "--native",
            "--duration",
            "6",
            "--format",
            "collapsed",
            "-o",
            "busy.txt",
        ];
        let (rate, figure, kernel) =
            super::assert_cpu_figure_agrees_with_the_kernel(cwd.path(), busy, &args);
        println!(
            "busy with --native: {rate:.1} Hz used, about {figure:.0} ms printed, {kernel:.0} ms counted by the kernel"
        );
    }

    /// A worker in the collector (a stand-in: `gc.collect()` over a large
    /// structure of cycles), read with `--native`: every sample in
    /// `gc_collect_main` keeps the Python frames beneath it, and `dump`
    /// of the shell above it places the worker in its Python function.
    #[test]
    fn a_worker_in_the_collector_keeps_its_python_frames_beneath_gc_collect_main() {
        let mut cmd = Command::new("sh");
        // `; :` keeps the shell (not Python) as the worker's parent.
        cmd.args(["-c", "\"$0\" \"$1\" \"$2\"; :"])
            .arg(support::python())
            .arg(fixture("gc_worker.py"))
            .arg(tag("gc"));
        let mut tree = Tree::start(cmd);
        let (name, worker) = tree.ready();
        assert_eq!(name, "gc");
        let cwd = tempfile::tempdir().unwrap();
        let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
            .args(["record", &worker.to_string(), "--native", "--duration", "2"])
            .args(["--format", "collapsed", "-o", "gc.txt"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let collapsed = std::fs::read_to_string(cwd.path().join("gc.txt")).unwrap();
        let in_gc: Vec<&str> = collapsed
            .lines()
            .filter(|l| l.contains("gc_collect_main"))
            .collect();
        assert!(
            !in_gc.is_empty(),
            "no sample in the collector:\n{collapsed}"
        );
        for line in in_gc {
            let python = line.find("collect_in_a_loop (gc_worker.py");
            let gc = line.find("gc_collect_main");
            assert!(python.is_some() && python < gc, "{line}");
        }
        let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
            .args(["dump", &tree.pid().to_string(), "--native"])
            .output()
            .unwrap();
        let text = stdout_of(&out);
        assert!(out.status.success(), "{text}");
        assert!(
            text.contains(&format!(
                "worker {worker} is busy (1 active thread), in collect_in_a_loop (gc_worker.py:"
            )),
            "{text}"
        );
    }

    #[test]
    fn a_rust_process_the_kernel_will_not_let_us_unwind_gives_the_permission_error() {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rust-spinner"));
        cmd.args(["0", "not-dumpable"]);
        let mut tree = Tree::start(cmd);
        tree.line("ready");
        let pid = tree.pid().to_string();
        let cwd = tempfile::tempdir().unwrap();
        for args in [
            vec!["dump", &pid, "--native"],
            vec!["top", &pid, "--native", "-n", "1"],
        ] {
            super::assert_refused_without_ptrace_rights(cwd.path(), &pid, &args);
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(status.contains("TracerPid:\t0"), "{status}");
    }

    #[test]
    fn top_native_finds_a_rust_process_in_its_own_busy_function() {
        let mut tree = Tree::start({
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_rust-spinner"));
            cmd.arg("0");
            cmd
        });
        tree.line("ready");
        {
            use std::io::Write as _;
            let stdin = tree.stdin.as_mut().expect("piped");
            writeln!(stdin, "go").unwrap();
            stdin.flush().unwrap();
        }
        let cwd = tempfile::tempdir().unwrap();
        let out = support::coldstart_bounded(cwd.path(), LINE_TIMEOUT)
            // A set rate: each refresh holds about 20 rounds, whatever the
            // load (the adaptive one can fall to a round a second).
            .args(["top", &tree.pid().to_string(), "--native", "-n", "2"])
            .args(["--rate", "20"])
            .output()
            .unwrap();
        let text = stdout_of(&out);
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // In the last refresh the known function is on the stack of most
        // samples (its own time is shared with the calls it makes).
        let last = text.rsplit("coldstart top:").next().unwrap_or_default();
        let row = last
            .lines()
            .find(|l| l.contains("spin_in_a_known_function (rust_spinner.rs:"))
            .unwrap_or_else(|| panic!("the known function is not listed:\n{text}"));
        let total_share: f64 = row
            .split_whitespace()
            .nth(3)
            .and_then(|p| p.trim_end_matches('%').parse().ok())
            .unwrap_or_else(|| panic!("no total share in {row:?}"));
        assert!(total_share >= 50.0, "{text}");
    }
}
