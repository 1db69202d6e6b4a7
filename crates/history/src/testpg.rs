//! Tests only (this crate's, and with the `test-server` feature the
//! integration tests'): a real PostgreSQL server that a test starts itself.
//! `initdb` into a temporary folder (a password for the one user, trust
//! on its unix socket, SCRAM on the loopback port), then `postgres` on a
//! free loopback port with its socket in that folder, in a process group
//! of its own. As root (which `initdb` refuses) both run as `nobody` in a
//! folder it owns. Dropped: a fast shutdown of the group, SIGKILL if it
//! lingers, the folder removed.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::location::{Location, PgUrl};

/// The test server's user.
pub const USER: &str = "coldstart";
/// The database `initdb` makes, to connect to before any other exists.
const ADMIN_DB: &str = "postgres";
/// The user's password: the redaction tests look for it everywhere.
pub const PASSWORD: &str = "pw-Zq81x-never-shown";

/// `nobody`, whom the server runs as when the tests run as root.
const NOBODY: u32 = 65534;

/// A running server.
#[derive(Debug)]
pub struct PgServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// The folder of PostgreSQL's server binaries: `$COLDSTART_PG_BIN`, else
/// the newest `/usr/lib/postgresql/*/bin` (Debian's layout), else the
/// folder of `initdb` on PATH.
fn bin_dir() -> Option<PathBuf> {
    let has = |d: &Path| d.join("initdb").is_file() && d.join("postgres").is_file();
    if let Some(d) = std::env::var_os("COLDSTART_PG_BIN").map(PathBuf::from) {
        return has(&d).then_some(d);
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| has(d))
        .collect();
    debian.sort();
    if let Some((_, d)) = debian.pop() {
        return Some(d);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| has(d))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A command run as `nobody` when the tests run as root, in the server's
/// folder (the test's own may be closed to `nobody`).
fn as_server_user(program: PathBuf, dir: &Path) -> Command {
    let mut c = Command::new(program);
    c.current_dir(dir);
    if is_root() {
        // std drops the supplementary groups when it sets the uid as root.
        c.uid(NOBODY).gid(NOBODY);
    }
    c.stdin(Stdio::null());
    c
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl PgServer {
    /// A fresh server for `case`, or `None` (with a `NOT RUN` line, and a
    /// failure under `cargo xtask test`) when PostgreSQL is not installed.
    pub fn start(case: &str) -> Option<PgServer> {
        let bin = test_interpreters::or_not_run(bin_dir(), case, || {
            "PostgreSQL's server binaries (initdb, postgres) were not found: install Debian's \
             `postgresql` package or set COLDSTART_PG_BIN"
                .to_owned()
        })?;
        // Under root's own temporary folder `nobody` may not reach it.
        let base = if is_root() {
            PathBuf::from("/tmp")
        } else {
            std::env::temp_dir()
        };
        let dir = tempfile::Builder::new()
            .prefix("coldstart-pg-")
            .tempdir_in(base)
            .expect("a temporary folder");
        if is_root() {
            std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY))
                .expect("chown the server's folder to nobody");
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).expect("write the password file");
        if is_root() {
            std::os::unix::fs::chown(&pwfile, Some(NOBODY), Some(NOBODY)).expect("chown");
        }
        let out = as_server_user(bin.join("initdb"), dir.path())
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-U", USER, "-E", "UTF8", "--no-sync"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .expect("run initdb");
        assert!(out.status.success(), "initdb failed: {out:?}");
        // A port found free may be taken before the server binds it: a
        // server that ends at once is started again on another.
        let mut last = String::new();
        for _ in 0..3 {
            match PgServer::spawn(&bin, dir.path()) {
                Ok((child, port)) => return Some(PgServer { child, port, dir }),
                Err(log) => last = log,
            }
        }
        panic!("the PostgreSQL server did not start: {last}");
    }

    /// Starts `postgres` and waits, by connecting, for it to accept; the
    /// server's log when it ended or never accepted within the deadline.
    fn spawn(bin: &Path, dir: &Path) -> Result<(Child, u16), String> {
        let port = free_port();
        let log = dir.join("server.log");
        let file = std::fs::File::create(&log).expect("the server's log");
        let mut child = as_server_user(bin.join("postgres"), dir)
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-p", &port.to_string(), "-k"])
            .arg(dir)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .stdout(file.try_clone().expect("the log"))
            .stderr(file)
            .process_group(0)
            .spawn()
            .expect("start postgres");
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = format!("postgres://{USER}:{PASSWORD}@127.0.0.1:{port}/{ADMIN_DB}");
        let config: postgres::Config = url.parse().expect("a valid URL");
        loop {
            if config.connect(postgres::NoTls).is_ok() {
                return Ok((child, port));
            }
            let ended = child.try_wait().expect("poll the server").is_some();
            if ended || Instant::now() > deadline {
                stop(&mut child);
                return Err(std::fs::read_to_string(&log).unwrap_or_default());
            }
            // Polling the server with a deadline, not waiting a fixed time.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's URL with the password in it.
    pub fn url(&self) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{ADMIN_DB}",
            self.port
        )
    }

    /// The server's URL without a password.
    pub fn url_without_password(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{ADMIN_DB}", self.port)
    }

    /// A [`Location`] of a fresh database on the server, named `db`.
    pub fn database(&self, db: &str) -> Location {
        let admin: postgres::Config = self.url().parse().expect("a valid URL");
        let mut client = admin
            .connect(postgres::NoTls)
            .expect("connect to the test server");
        client
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .expect("create a database");
        let url = format!("postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{db}", self.port);
        Location::Postgres(PgUrl::parse(&url).expect("a postgres URL"))
    }

    /// The server's loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's temporary folder.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// A fast shutdown of the server's process group (SIGINT), SIGKILL to the
/// group if it is still there after the deadline.
fn stop(child: &mut Child) {
    let group = -(child.id() as i32);
    // SAFETY: kill has no memory preconditions; the group is the server's own.
    unsafe { libc::kill(group, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            // Its children (the backends) leave with it; reap nothing more.
            // SAFETY: as above.
            unsafe { libc::kill(group, libc::SIGKILL) };
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above.
    unsafe { libc::kill(group, libc::SIGKILL) };
    let _ = child.wait();
}

impl Drop for PgServer {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}
