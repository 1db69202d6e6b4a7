//! The traces opened where users open them: `coldstart trace`'s Chrome
//! JSON in speedscope (the npm package, pinned in `tests/viewers`, which
//! `cargo xtask test` installs), served from a loopback port and loaded
//! by headless Chromium. The import must succeed (speedscope names the
//! page after the profile only then), speedscope must say nothing of
//! frames it could not nest ("Tried to end ... when ... was on the top of
//! the stack", which fractional timestamps on a clock far from zero and
//! frames written innermost first once caused), and the screenshot must
//! show a flame chart, not an empty page.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::support::{self, printed};

/// What speedscope prints when it could not read a file or nest a frame.
const COMPLAINTS: &[&str] = &[
    "Tried to end",
    "Failed to load format",
    "Maximum call stack",
    "Unrecognized format",
    "Uncaught",
];

/// A static file server on a loopback port (Python's `http.server`),
/// killed and reaped when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// Serves `dir`; the port is the one the server says it bound.
    fn start(dir: &Path) -> Server {
        let mut child = Command::new(support::python())
            .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1"])
            .arg("--directory")
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python runs http.server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// speedscope's release page, when the suite's viewers are installed.
fn speedscope(case: &str) -> Option<PathBuf> {
    let page = support::root().join("tests/viewers/node_modules/speedscope/dist/release");
    test_interpreters::or_not_run(
        page.join("index.html").exists().then_some(page),
        case,
        || {
            "speedscope is not installed in tests/viewers (`cargo xtask test` runs `npm ci` there)"
                .into()
        },
    )
}

/// Headless Chromium on `url`, with `extra` flags and the page's console
/// on stderr: (stdout, stderr).
fn chromium(chromium: &Path, tmp: &Path, url: &str, extra: &[&str]) -> (String, String) {
    let (mut browser, _profile) = support::headless_chromium(chromium, tmp);
    let out = printed(
        browser
            .args([
                // WebGL, which speedscope draws with, on the CPU.
                "--enable-unsafe-swiftshader",
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1200,800",
                "--virtual-time-budget=10000",
            ])
            .args(extra)
            .arg(url)
            .output()
            .expect("chromium runs"),
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A command's trace (a stand-in whose stack changes depth every few
/// milliseconds, so frames of many depths open and close together on a
/// clock far from zero) loads in speedscope without a complaint, and its
/// flame chart is drawn.
#[test]
fn a_traced_commands_chrome_json_loads_in_speedscope_with_every_frame_nested() {
    let case = "a trace opened in speedscope";
    let Some(release) = speedscope(case) else {
        return;
    };
    let Some(browser) = test_interpreters::installed("/usr/bin/chromium", case) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::os::unix::fs::symlink(&release, site.join("speedscope")).unwrap();
    let out = support::coldstart(dir.path())
        .args(["trace", "--output"])
        .arg(format!("chrome-json={}", site.join("t.json").display()))
        .arg("--")
        .arg(support::python())
        .arg(support::fixtures().join("trace/deep_stacks.py"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = Server::start(&site);
    let url = format!(
        "http://127.0.0.1:{0}/speedscope/index.html#profileURL=http://127.0.0.1:{0}/t.json&title=coldstart-trace",
        server.port
    );
    let (dom, log) = chromium(browser, dir.path(), &url, &["--dump-dom"]);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    for complaint in COMPLAINTS {
        assert!(
            !log.contains(complaint),
            "speedscope said {complaint:?}: {console:#?}"
        );
    }
    assert!(
        dom.contains("<title>coldstart-trace - speedscope</title>"),
        "the import did not finish (speedscope names the page after the profile): {console:#?}\n{dom}"
    );
    let shot = dir.path().join("shot.png");
    chromium(
        browser,
        dir.path(),
        &url,
        &[&format!("--screenshot={}", shot.display())],
    );
    let colours = distinct_colours(&shot);
    assert!(
        colours > 20,
        "the screenshot shows {colours} colours: no flame chart drawn"
    );
}

/// How many distinct colours the PNG at `path` holds (a flame chart's
/// frames are drawn in many; an empty or error page in a handful).
fn distinct_colours(path: &Path) -> usize {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    buf[..info.buffer_size()]
        .chunks(step)
        .map(|px| px[..3.min(step)].to_vec())
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}
