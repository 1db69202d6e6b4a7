//! Short helper processes: the one way to run a command that is not a
//! worker (an embedded Python script asked a question, a `py-spy dump`) and
//! read what it printed.
//!
//! Like a worker, a helper runs in its own process group, registered with
//! the group registry (so [`crate::kill_all`] and the guard process end it
//! too), its leader reaped and its group killed by the waiter; unlike a
//! worker it speaks no protocol. [`run_helper`] runs one to completion with
//! both pipes drained, and ends its group when it outlives its timeout.
//! [`Script`] is an embedded Python script: written to a private temporary
//! folder, run with `-I -B` (isolated: no user site, no `PYTHON*`
//! variables, the script's folder not on `sys.path`; no bytecode written),
//! either to completion ([`Script::run`], its answer a tagged line of
//! [`HelperOutput::tagged`]) or as a conversation over its stdin and stdout
//! ([`Script::spawn`], each answer awaited with a bound). A `.pth` file or
//! an environment's `sitecustomize` that hangs therefore never hangs the
//! caller.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, BufRead as _, BufReader, Read, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use crate::ExitStatus;
use crate::group;
use crate::reap::{self, ExitInfo};

/// Why a [`Script`] may not finish: Python's own start-up hangs.
const SCRIPT_HANG: &str =
    "; a `.pth` file or sitecustomize of that environment may hang at start-up";

/// How long the pipes are read after the helper's leader exited and its
/// group was killed: a process that left the group may hold them open.
const PIPES_AFTER_EXIT: Duration = Duration::from_secs(2);

/// What a finished helper printed, and how it ended.
#[derive(Debug, Clone)]
pub struct HelperOutput {
    /// How its leader ended.
    pub status: ExitStatus,
    /// Its stdout (lossy UTF-8).
    pub stdout: String,
    /// Its stderr (lossy UTF-8).
    pub stderr: String,
}

impl HelperOutput {
    /// The rest of the first stdout line that starts with `tag`, when the
    /// helper exited with code 0: an embedded script's answer.
    pub fn tagged(&self, tag: &str) -> Option<&str> {
        if !self.status.success() {
            return None;
        }
        self.stdout.lines().find_map(|l| l.strip_prefix(tag))
    }
}

/// Why a helper gave no output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HelperError {
    /// The embedded script could not be written to a private folder.
    #[error("could not write {} for {what}: {source}", path.display())]
    Write {
        /// What was written.
        what: String,
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The program could not be started.
    #[error("could not start {program}: {source}")]
    Start {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// It did not finish (or answer) in time: its group was killed.
    #[error(
        "{program} did not finish within {after:?} and was killed with its process group{hint}{}",
        last_words(stderr)
    )]
    Timeout {
        /// The program and what it ran.
        program: String,
        /// The bound.
        after: Duration,
        /// What may cause it (for a [`Script`]: its environment's start-up).
        hint: &'static str,
        /// What it printed on stdout meanwhile.
        stdout: String,
        /// What it printed on stderr meanwhile.
        stderr: String,
    },
    /// A conversation's helper closed its stdout or could not be written to.
    #[error("{program} stopped answering ({detail}){}", last_words(stderr))]
    Gone {
        /// The program and what it ran.
        program: String,
        /// What happened.
        detail: String,
        /// What it printed on stderr.
        stderr: String,
    },
}

fn last_words(stderr: &str) -> String {
    let s = stderr.trim_end();
    if s.is_empty() {
        String::new()
    } else {
        format!("\n[stderr]\n{s}")
    }
}

/// A pipe drained to its end on a thread; the bytes arrive on the channel.
fn drain(mut pipe: impl Read + Send + 'static) -> io::Result<Receiver<Vec<u8>>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("spawn-helper-pipe".to_owned())
        .spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            let _ = tx.send(buf);
        })?;
    Ok(rx)
}

/// A started helper: its pid (the group id) and the waiter's report.
struct Started {
    pid: i32,
    exit: Receiver<ExitInfo>,
}

impl Started {
    /// `cmd` started in its own process group, registered, with a waiter.
    fn new(
        cmd: &mut std::process::Command,
        program: &str,
    ) -> Result<(Started, std::process::Child), HelperError> {
        reap::become_subreaper();
        cmd.process_group(0);
        let child = cmd.spawn().map_err(|source| HelperError::Start {
            program: program.to_owned(),
            source,
        })?;
        let pid = child.id() as i32;
        group::register(pid);
        // The waiter's note for a stdout reader: none here.
        let (notify, _) = mpsc::sync_channel(1);
        match reap::spawn_waiter(pid, notify) {
            Ok((exit, _)) => Ok((Started { pid, exit }, child)),
            Err(source) => {
                let mut child = child;
                let _ = group::killpg(pid, libc::SIGKILL);
                let _ = child.wait();
                group::unregister(pid);
                Err(HelperError::Start {
                    program: program.to_owned(),
                    source,
                })
            }
        }
    }

    /// Kills the group (if still live) and waits for the waiter's report.
    fn kill(&self) -> Option<ExitInfo> {
        group::signal(self.pid, libc::SIGKILL);
        self.exit.recv().ok()
    }
}

/// Runs `cmd` to completion in its own process group, stdin from
/// `/dev/null`, stdout and stderr captured. When it outlives `timeout`, its
/// group is killed and [`HelperError::Timeout`] holds what it printed.
pub fn run_helper(
    mut cmd: std::process::Command,
    timeout: Duration,
) -> Result<HelperOutput, HelperError> {
    let program = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (started, mut child) = Started::new(&mut cmd, &program)?;
    let pipes = (|| {
        let out = drain(child.stdout.take().expect("piped"))?;
        let err = drain(child.stderr.take().expect("piped"))?;
        Ok::<_, io::Error>((out, err))
    })();
    // The waiter reaps the child.
    drop(child);
    let (out, err) = match pipes {
        Ok(p) => p,
        Err(source) => {
            started.kill();
            return Err(HelperError::Start { program, source });
        }
    };
    let (info, timed_out) = match started.exit.recv_timeout(timeout) {
        Ok(info) => (Some(info), false),
        Err(_) => (started.kill(), true),
    };
    let text = |rx: Receiver<Vec<u8>>| {
        rx.recv_timeout(PIPES_AFTER_EXIT)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let (stdout, stderr) = (text(out), text(err));
    if timed_out {
        return Err(HelperError::Timeout {
            program,
            after: timeout,
            hint: "",
            stdout,
            stderr,
        });
    }
    Ok(HelperOutput {
        status: info.map_or(ExitStatus::Unknown, |i| i.status),
        stdout,
        stderr,
    })
}

/// An embedded Python script, run by a given interpreter with `-I -B` from
/// a private temporary folder (see the module doc).
#[derive(Debug, Clone)]
pub struct Script {
    name: String,
    source: String,
    files: Vec<(String, Vec<u8>)>,
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    timeout: Duration,
}

/// A script's bound when none is given.
pub const DEFAULT_SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

impl Script {
    /// The script `source`, written as `name` (such as `pyinfo.py`).
    pub fn new(name: &str, source: impl Into<String>) -> Script {
        Script {
            name: name.to_owned(),
            source: source.into(),
            files: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            timeout: DEFAULT_SCRIPT_TIMEOUT,
        }
    }

    /// A file written beside the script, its path passed as the next
    /// argument (a request too large for the command line).
    pub fn file_arg(mut self, name: &str, bytes: impl Into<Vec<u8>>) -> Script {
        self.files.push((name.to_owned(), bytes.into()));
        self
    }

    /// Variables set on top of the inherited environment (`-I` still
    /// ignores the `PYTHON*` ones).
    pub fn envs(mut self, env: &BTreeMap<String, String>) -> Script {
        self.env
            .extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        self
    }

    /// Where it runs (default: its private folder).
    pub fn current_dir(mut self, dir: &Path) -> Script {
        self.cwd = Some(dir.to_path_buf());
        self
    }

    /// The bound on the whole run ([`Script::run`]) or on each answer
    /// ([`Script::spawn`]); default [`DEFAULT_SCRIPT_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Script {
        self.timeout = timeout;
        self
    }

    /// The folder with the script and its files, and the command that runs it.
    fn prepare(
        &self,
        python: &Path,
    ) -> Result<(tempfile::TempDir, std::process::Command), HelperError> {
        let write_error = |path: PathBuf| {
            let what = self.name.clone();
            move |source| HelperError::Write { what, path, source }
        };
        let dir = tempfile::Builder::new()
            .prefix("coldstart-script-")
            .tempdir()
            .map_err(write_error(std::env::temp_dir()))?;
        let script = dir.path().join(&self.name);
        std::fs::write(&script, &self.source).map_err(write_error(script.clone()))?;
        let mut args: Vec<OsString> = vec!["-I".into(), "-B".into(), script.into()];
        for (name, bytes) in &self.files {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).map_err(write_error(path.clone()))?;
            args.push(path.into());
        }
        let mut cmd = std::process::Command::new(python);
        cmd.args(args)
            .envs(&self.env)
            .current_dir(self.cwd.as_deref().unwrap_or(dir.path()));
        Ok((dir, cmd))
    }

    fn program(&self, python: &Path) -> String {
        format!("{} -I -B {}", python.display(), self.name)
    }

    /// Runs it to completion, bounded by its timeout.
    pub fn run(&self, python: &Path) -> Result<HelperOutput, HelperError> {
        let (_dir, cmd) = self.prepare(python)?;
        run_helper(cmd, self.timeout).map_err(|e| match e {
            HelperError::Timeout {
                after,
                stdout,
                stderr,
                ..
            } => HelperError::Timeout {
                program: self.program(python),
                after,
                hint: SCRIPT_HANG,
                stdout,
                stderr,
            },
            HelperError::Start { source, .. } => HelperError::Start {
                program: self.program(python),
                source,
            },
            other => other,
        })
    }

    /// Starts it for a conversation: lines to its stdin, each answer line
    /// from its stdout awaited for at most its timeout.
    pub fn spawn(&self, python: &Path) -> Result<Conversation, HelperError> {
        let (dir, mut cmd) = self.prepare(python)?;
        let program = self.program(python);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let (started, mut child) = Started::new(&mut cmd, &program)?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        drop(child);
        let threads = (|| {
            let (tx, lines) = mpsc::channel();
            std::thread::Builder::new()
                .name("spawn-helper-lines".to_owned())
                .spawn(move || {
                    for line in BufReader::new(stdout).lines() {
                        let end = line.is_err();
                        if tx.send(line).is_err() || end {
                            break;
                        }
                    }
                })?;
            Ok::<_, io::Error>((lines, drain(stderr)?))
        })();
        match threads {
            Ok((lines, stderr)) => Ok(Conversation {
                program,
                started,
                stdin: Some(stdin),
                lines,
                stderr: Some(stderr),
                timeout: self.timeout,
                _dir: dir,
            }),
            Err(source) => {
                started.kill();
                Err(HelperError::Start { program, source })
            }
        }
    }
}

/// A [`Script`] started by [`Script::spawn`]: killed with its group and
/// reaped when dropped.
#[derive(Debug)]
pub struct Conversation {
    program: String,
    started: Started,
    stdin: Option<ChildStdin>,
    lines: Receiver<io::Result<String>>,
    stderr: Option<Receiver<Vec<u8>>>,
    timeout: Duration,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started").field("pid", &self.pid).finish()
    }
}

impl Conversation {
    /// Its pid, also its process group's id.
    pub fn pid(&self) -> u32 {
        self.started.pid as u32
    }

    /// What it printed on stderr, once it is ended.
    fn ended_stderr(&mut self) -> String {
        self.started.kill();
        self.stderr
            .take()
            .and_then(|rx| rx.recv_timeout(PIPES_AFTER_EXIT).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    fn gone(&mut self, detail: String) -> HelperError {
        HelperError::Gone {
            program: self.program.clone(),
            detail,
            stderr: self.ended_stderr(),
        }
    }

    /// Writes one line (a newline is added) to its stdin.
    pub fn send(&mut self, line: &str) -> Result<(), HelperError> {
        let written = match self.stdin.as_mut() {
            Some(stdin) => writeln!(stdin, "{line}").and_then(|()| stdin.flush()),
            None => Err(io::Error::new(io::ErrorKind::BrokenPipe, "stdin is closed")),
        };
        written.map_err(|e| self.gone(format!("writing to its stdin: {e}")))
    }

    /// The next line of its stdout, waited for at most the script's
    /// timeout; on a timeout its group is killed.
    pub fn recv(&mut self) -> Result<String, HelperError> {
        match self.lines.recv_timeout(self.timeout) {
            Ok(Ok(line)) => Ok(line),
            Ok(Err(e)) => Err(self.gone(format!("reading its stdout: {e}"))),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(self.gone("its stdout closed".to_owned()))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let stderr = self.ended_stderr();
                Err(HelperError::Timeout {
                    program: self.program.clone(),
                    after: self.timeout,
                    hint: SCRIPT_HANG,
                    stdout: String::new(),
                    stderr,
                })
            }
        }
    }

    /// Closes its stdin and waits, at most its timeout, for it to exit; then
    /// its group is killed and it is reaped.
    pub fn finish(mut self) -> Option<ExitStatus> {
        self.stdin = None;
        let info = match self.started.exit.recv_timeout(self.timeout) {
            Ok(info) => Some(info),
            Err(_) => self.started.kill(),
        };
        info.map(|i| i.status)
    }
}

impl Drop for Conversation {
    fn drop(&mut self) {
        self.stdin = None;
        // Killing a reaped group is a no-op (the registry knows it is gone),
        // and a report already taken (by `finish`, a timeout) is not waited
        // for again: this returns once the group is gone.
        self.started.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use test_interpreters::default_python as python;

    #[test]
    fn a_script_answers_on_its_tagged_line_with_its_file_argument() {
        let _serial = crate::serial();
        let out = Script::new(
            "ask.py",
            "import sys\nprint('noise')\nprint('TAG ' + open(sys.argv[1]).read())\n",
        )
        .file_arg("request.json", "{\"a\": 1}")
        .run(python())
        .unwrap();
        assert_eq!(out.tagged("TAG "), Some("{\"a\": 1}"));
        assert_eq!(out.tagged("OTHER "), None);
    }

    #[test]
    fn a_failing_script_has_no_answer_and_keeps_its_stderr() {
        let _serial = crate::serial();
        let out = Script::new("fail.py", "import sys\nprint('TAG 1')\nsys.exit('boom')\n")
            .run(python())
            .unwrap();
        assert_eq!(out.status, ExitStatus::Code(1));
        assert_eq!(out.tagged("TAG "), None);
        assert!(out.stderr.contains("boom"), "{out:?}");
    }

    #[test]
    fn a_program_that_cannot_start_says_so() {
        let _serial = crate::serial();
        let err = Script::new("x.py", "")
            .run(Path::new("/nonexistent/python3"))
            .unwrap_err();
        assert!(matches!(err, HelperError::Start { .. }), "{err}");
    }

    #[test]
    fn a_hanging_pth_file_times_out_and_its_group_is_killed() {
        let _serial = crate::serial();
        // A venv whose site-packages holds a `.pth` line that never returns:
        // every interpreter start of that environment hangs in `site`.
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        let made = std::process::Command::new(python())
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(made.success());
        let site = std::fs::read_dir(venv.join("lib"))
            .unwrap()
            .flatten()
            .map(|e| e.path().join("site-packages"))
            .find(|p| p.is_dir())
            .expect("the venv has a site-packages");
        std::fs::write(
            site.join("hang.pth"),
            "import sys, signal; sys.stderr.write('hanging in site\\n'); sys.stderr.flush(); signal.pause()\n",
        )
        .unwrap();
        let err = Script::new("q.py", "print('TAG never')\n")
            .timeout(Duration::from_secs(1))
            .run(&venv.join("bin/python"))
            .unwrap_err();
        let HelperError::Timeout {
            program, stderr, ..
        } = &err
        else {
            panic!("not a timeout: {err}");
        };
        assert!(program.ends_with("-I -B q.py"), "{program}");
        assert!(stderr.contains("hanging in site"), "{err}");
        assert!(err.to_string().contains(".pth"), "{err}");
    }

    #[test]
    fn a_conversation_answers_line_by_line_and_times_out_when_it_stops() {
        let _serial = crate::serial();
        let mut c = Script::new(
            "echo.py",
            "import sys, signal\nfor line in sys.stdin:\n    if line.strip() == 'stop':\n        sys.stderr.write('stopping\\n'); sys.stderr.flush(); signal.pause()\n    print('echo ' + line.strip(), flush=True)\n",
        )
        // Bounds the hang the test provokes; long enough that a loaded
        // machine starting the interpreter still answers "echo one" in it.
        .timeout(Duration::from_secs(5))
        .spawn(python())
        .unwrap();
        let pid = c.pid() as i32;
        c.send("one").unwrap();
        assert_eq!(c.recv().unwrap(), "echo one");
        c.send("stop").unwrap();
        let err = c.recv().unwrap_err();
        assert!(
            matches!(&err, HelperError::Timeout { stderr, .. } if stderr.contains("stopping")),
            "{err}"
        );
        drop(c);
        assert!(!group::group_exists(pid), "the group is gone");
    }
}
