//! What to start: argv, environment overrides, working directory, the CPUs
//! to run on, the container limits to run under, and how much of the
//! worker's output the harness keeps.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::transport::Transport;

/// The default bound of the in-memory stderr tail: 64 KiB.
pub const DEFAULT_STDERR_TAIL_BYTES: usize = 64 * 1024;
/// The default number of noise lines tolerated on stdout over a worker's life.
pub const DEFAULT_MAX_NOISE_LINES: usize = 100;

/// How long writing one line to a worker's stdin may block, by default.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long connecting to a tcp worker may take, by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A worker's command line. No shell is involved: the program is executed
/// directly with these arguments.
#[derive(Debug, Clone)]
pub struct Command {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    /// Overrides on top of the inherited environment, in order; `None`
    /// removes the variable.
    pub(crate) env: Vec<(OsString, Option<OsString>)>,
    pub(crate) current_dir: Option<PathBuf>,
    pub(crate) stderr_file: Option<PathBuf>,
    pub(crate) stderr_tail_bytes: usize,
    pub(crate) max_noise_lines: usize,
    pub(crate) write_timeout: Duration,
    /// The CPU set to start the worker on (ascending, no duplicates).
    pub(crate) cpus: Option<Vec<usize>>,
    /// The CPU quota and memory limit of the worker's own cgroup.
    pub(crate) limits: timeline::Limits,
    pub(crate) transport: Transport,
    pub(crate) connect_timeout: Duration,
    /// The overrides as the user gave them, kept once the tool added
    /// variables of its own ([`Command::instrument`]); what
    /// [`Command::display`] shows.
    pub(crate) given_env: Option<Vec<(OsString, Option<OsString>)>>,
    /// What the tool's own variables are for, in order.
    pub(crate) instruments: Vec<String>,
}

/// Sets `key` in `env`: last set wins, in the place it was first set.
fn set(env: &mut Vec<(OsString, Option<OsString>)>, key: &OsStr, value: Option<OsString>) {
    match env.iter_mut().find(|(k, _)| k == key) {
        Some(entry) => entry.1 = value,
        None => env.push((key.to_owned(), value)),
    }
}

impl Command {
    /// Runs `program` (looked up in `PATH` when it has no `/`).
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Command {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            current_dir: None,
            stderr_file: None,
            stderr_tail_bytes: DEFAULT_STDERR_TAIL_BYTES,
            max_noise_lines: DEFAULT_MAX_NOISE_LINES,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            cpus: None,
            limits: timeline::Limits::default(),
            transport: Transport::Stdio,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            given_env: None,
            instruments: Vec::new(),
        }
    }

    /// How the worker speaks the protocol (default [`Transport::Stdio`],
    /// which also takes a worker whose ready line on stderr names
    /// `"transport": "tcp"`). With [`Transport::Tcp`] the ready line is
    /// read from stderr only and stdout is drained and ignored.
    pub fn transport(&mut self, transport: Transport) -> &mut Self {
        self.transport = transport;
        self
    }

    /// The transport the worker was started for.
    pub fn get_transport(&self) -> Transport {
        self.transport
    }

    /// How long connecting to a tcp worker's address may take (default
    /// 5 s); a worker that listens before it prints its ready line answers
    /// at once.
    pub fn connect_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.connect_timeout = timeout;
        self
    }

    /// Adds one argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable on top of the inherited environment.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.set_env(key.as_ref(), Some(value.as_ref().to_owned()))
    }

    /// Removes an inherited environment variable.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        self.set_env(key.as_ref(), None)
    }

    /// Sets variables the tool adds for an instrument of its own (an import
    /// recorder, `-X importtime`), `what` naming it: they are set as
    /// [`Command::env`] sets them, but [`Command::display`] goes on showing
    /// the command as its user gave it (the tool's paths mean nothing to
    /// them and are gone after the run), and [`Command::instruments`] says
    /// what ran beside it.
    pub fn instrument<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        &mut self,
        what: impl Into<String>,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> &mut Self {
        let vars = vars
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_owned(), Some(v.as_ref().to_owned())));
        self.add_instrument(what.into(), vars)
    }

    /// Removes an inherited variable for the tool's own purpose, `what`
    /// naming it (bench keeps `-X importtime` out of timed workers): as
    /// [`Command::instrument`], the command reads as given and
    /// [`Command::instruments`] says it.
    pub fn instrument_without(
        &mut self,
        what: impl Into<String>,
        key: impl AsRef<OsStr>,
    ) -> &mut Self {
        self.add_instrument(what.into(), [(key.as_ref().to_owned(), None)])
    }

    /// Keeps the overrides as given (once), names the instrument and sets
    /// its variables (`None`: removed) for the run only.
    fn add_instrument(
        &mut self,
        what: String,
        vars: impl IntoIterator<Item = (OsString, Option<OsString>)>,
    ) -> &mut Self {
        if self.given_env.is_none() {
            self.given_env = Some(self.env.clone());
        }
        self.instruments.push(what);
        for (k, v) in vars {
            set(&mut self.env, &k, v);
        }
        self
    }

    /// What the tool's own variables are for ([`Command::instrument`]),
    /// in the order added; empty for a command run as given.
    pub fn instruments(&self) -> &[String] {
        &self.instruments
    }

    /// The one entry of `key`, last set wins, in the place it was first
    /// set (so the command reads as it runs, each variable once); in the
    /// command as given too, once the tool added its own.
    fn set_env(&mut self, key: &OsStr, value: Option<OsString>) -> &mut Self {
        if let Some(given) = &mut self.given_env {
            set(given, key, value.clone());
        }
        set(&mut self.env, key, value);
        self
    }

    /// Runs the worker in a cgroup of its own with this CPU quota and
    /// memory limit, as a container would (see [`crate::cgroup`]); the
    /// default, no limits, starts it in the harness's own cgroup. A
    /// machine where the cgroup cannot be made fails the spawn, saying
    /// what is missing.
    pub fn limits(&mut self, limits: timeline::Limits) -> &mut Self {
        self.limits = limits;
        self
    }

    /// The limits the worker runs under.
    pub fn get_limits(&self) -> &timeline::Limits {
        &self.limits
    }

    /// Runs the worker in `dir`.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.current_dir = Some(dir.as_ref().to_owned());
        self
    }

    /// Also copies every byte of stderr to this file (created or truncated at
    /// spawn), for logs of any size such as `-X importtime` trees.
    pub fn stderr_file(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.stderr_file = Some(path.as_ref().to_owned());
        self
    }

    /// Bounds the in-memory stderr tail (default 64 KiB).
    pub fn stderr_tail_bytes(&mut self, bytes: usize) -> &mut Self {
        self.stderr_tail_bytes = bytes;
        self
    }

    /// How many noise lines (stdout lines not starting with `{`) are
    /// tolerated over the worker's life (default 100); one more is a
    /// protocol error.
    pub fn max_noise_lines(&mut self, lines: usize) -> &mut Self {
        self.max_noise_lines = lines;
        self
    }

    /// How long writing one request line to the worker's stdin may block
    /// (default 10 s): a worker that stops reading while requests pile up
    /// in the pipe is a timeout, never a harness stuck in `write`.
    pub fn write_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.write_timeout = timeout;
        self
    }

    /// Starts the worker on exactly these CPUs: `sched_setaffinity` in the
    /// child before `exec` (Linux), so everything the worker runs,
    /// interpreter start-up included, runs there, and every thread and
    /// process it starts inherits the set. An empty set, a CPU the machine
    /// does not let this process use, or one beyond
    /// [`affinity::MAX_CPUS`](crate::affinity::MAX_CPUS) makes the spawn
    /// fail with [`ErrorKind::SpawnFailed`](crate::ErrorKind::SpawnFailed)
    /// saying so. See [`crate::affinity::place`] for the set to use.
    pub fn cpus(&mut self, cpus: impl IntoIterator<Item = usize>) -> &mut Self {
        let mut set: Vec<usize> = cpus.into_iter().collect();
        set.sort_unstable();
        set.dedup();
        self.cpus = Some(set);
        self
    }

    /// The CPUs the worker is started on, when set.
    pub fn get_cpus(&self) -> Option<&[usize]> {
        self.cpus.as_deref()
    }

    /// The program.
    pub fn get_program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments.
    pub fn get_args(&self) -> impl Iterator<Item = &OsStr> {
        self.args.iter().map(OsString::as_os_str)
    }

    /// The environment overrides, in order (`None`: removed).
    pub fn get_envs(&self) -> impl Iterator<Item = (&OsStr, Option<&OsStr>)> {
        self.env.iter().map(|(k, v)| (k.as_os_str(), v.as_deref()))
    }

    /// The working directory, when set.
    pub fn get_current_dir(&self) -> Option<&Path> {
        self.current_dir.as_deref()
    }

    /// The command as a person would type it in a POSIX shell: the CPU set
    /// first (`taskset -c 1`), then environment overrides (`-u NAME` for a
    /// removal, as `env` spells it), then argv, each word quoted only when
    /// it needs to be. The overrides are the user's: what the tool added
    /// for its instruments ([`Command::instrument`]) is left out.
    pub fn display(&self) -> String {
        let mut words = Vec::new();
        if let Some(cpus) = &self.cpus {
            words.push(format!("taskset -c {}", crate::affinity::cpu_list(cpus)));
        }
        let env = self.given_env.as_ref().unwrap_or(&self.env);
        let removes = env.iter().any(|(_, v)| v.is_none());
        if removes {
            words.push("env".to_owned());
        }
        for (k, v) in env {
            match v {
                Some(v) => words.push(format!("{}={}", k.to_string_lossy(), quote(v))),
                None => words.push(format!("-u {}", quote(k))),
            }
        }
        words.push(quote(&self.program));
        words.extend(self.args.iter().map(|a| quote(a)));
        words.join(" ")
    }

    /// The std command to spawn, joining the cgroup of `join` (its fds
    /// open until the spawn returns) before `exec`; fails only on a CPU
    /// set that cannot be built.
    pub(crate) fn to_std(
        &self,
        join: Option<crate::cgroup::JoinFds>,
    ) -> Result<std::process::Command, crate::affinity::AffinityError> {
        use std::os::unix::process::CommandExt as _;
        use std::process::Stdio;

        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args);
        for (k, v) in &self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        if let Some(dir) = &self.current_dir {
            cmd.current_dir(dir);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(cpus) = &self.cpus {
            let set = crate::affinity::CpuSet::new(cpus)?;
            // SAFETY: the closure makes one async-signal-safe syscall on a
            // set built before `fork`; it allocates nothing and takes no
            // lock.
            unsafe {
                cmd.pre_exec(move || set.apply());
            }
        }
        if let Some(join) = join {
            // SAFETY: the closure makes write(2) and clock_gettime calls on
            // fds opened before `fork`; it allocates nothing (the fds were
            // gathered before the fork) and takes no lock.
            unsafe {
                cmd.pre_exec(move || crate::cgroup::join(&join));
            }
        }
        Ok(cmd)
    }
}

/// Quotes a word for a POSIX shell when it holds anything but safe characters.
fn quote(word: &OsStr) -> String {
    let s = word.to_string_lossy();
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
    if safe {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(cmd: &Command, expect: &str) {
        assert_eq!(cmd.display(), expect);
    }

    #[test]
    fn plain_argv() {
        check(
            Command::new("python3").args(["-m", "refworker"]),
            "python3 -m refworker",
        );
    }

    #[test]
    fn quotes_only_what_needs_it() {
        check(
            Command::new("/usr/bin/python3").args(["-c", "print('hi there')", ""]),
            r"/usr/bin/python3 -c 'print('\''hi there'\'')' ''",
        );
    }

    #[test]
    fn env_overrides_come_first() {
        check(
            Command::new("python3")
                .env("PYTHONPROFILEIMPORTTIME", "1")
                .env("A", "b c")
                .arg("w.py"),
            "PYTHONPROFILEIMPORTTIME=1 A='b c' python3 w.py",
        );
        check(
            Command::new("python3").env_remove("PYTHONPATH").arg("w.py"),
            "env -u PYTHONPATH python3 w.py",
        );
    }

    #[test]
    fn a_variable_set_twice_is_shown_and_set_once_with_its_last_value() {
        let mut cmd = Command::new("python3");
        cmd.env("PYTHONPATH", "worker")
            .env("A", "1")
            .env("PYTHONPATH", "/tmp/rec:worker")
            .arg("w.py");
        check(&cmd, "PYTHONPATH=/tmp/rec:worker A=1 python3 w.py");
        cmd.env_remove("A");
        check(&cmd, "env PYTHONPATH=/tmp/rec:worker -u A python3 w.py");
    }

    #[test]
    fn the_tools_own_variables_are_set_but_the_command_reads_as_given() {
        let mut cmd = Command::new("python3");
        cmd.env("PYTHONPATH", "worker").arg("w.py");
        cmd.instrument(
            "the import recorder",
            [
                ("PYTHONPATH", "/tmp/rec:worker"),
                ("COLDSTART_RECORD", "/tmp/r"),
            ],
        );
        cmd.instrument("-X importtime", [("PYTHONPROFILEIMPORTTIME", "1")]);
        check(&cmd, "PYTHONPATH=worker python3 w.py");
        assert_eq!(cmd.instruments(), ["the import recorder", "-X importtime"]);
        let set: Vec<_> = cmd.get_envs().collect();
        assert_eq!(
            set,
            [
                (
                    OsStr::new("PYTHONPATH"),
                    Some(OsStr::new("/tmp/rec:worker"))
                ),
                (OsStr::new("COLDSTART_RECORD"), Some(OsStr::new("/tmp/r"))),
                (OsStr::new("PYTHONPROFILEIMPORTTIME"), Some(OsStr::new("1"))),
            ]
        );
        cmd.instrument_without("no importtime", "PYTHONPROFILEIMPORTTIME");
        check(&cmd, "PYTHONPATH=worker python3 w.py");
        // The user's own settings after it show, and run.
        cmd.env_remove("A");
        check(&cmd, "env PYTHONPATH=worker -u A python3 w.py");
        assert_eq!(cmd.get_envs().last(), Some((OsStr::new("A"), None)));
        assert_eq!(
            cmd.get_envs().nth(2),
            Some((OsStr::new("PYTHONPROFILEIMPORTTIME"), None))
        );
        assert_eq!(
            cmd.instruments().last().map(String::as_str),
            Some("no importtime")
        );
    }

    #[test]
    fn a_cpu_set_reads_as_taskset() {
        check(
            Command::new("python3")
                .cpus([3, 1, 3])
                .env_remove("X")
                .arg("w.py"),
            "taskset -c 1,3 env -u X python3 w.py",
        );
        assert_eq!(Command::new("x").cpus([2, 0]).get_cpus(), Some(&[0, 2][..]));
        assert_eq!(Command::new("x").get_cpus(), None);
    }

    #[test]
    fn defaults() {
        let c = Command::new("x");
        assert_eq!(c.stderr_tail_bytes, DEFAULT_STDERR_TAIL_BYTES);
        assert_eq!(c.max_noise_lines, DEFAULT_MAX_NOISE_LINES);
        assert!(c.stderr_file.is_none());
    }
}
