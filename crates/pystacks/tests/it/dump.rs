//! `dump` against real CPython processes.

use crate::support::{Py, line_of};
use pystacks::{DumpOptions, Error, dump};

#[test]
fn a_hung_process_names_its_function_file_and_line_and_its_threads() {
    let py = Py::start("hang_in_named_function.py", &[]);
    py.expect_line("hanging");

    // The main thread printed its line just before blocking; with the
    // spinner holding the GIL it may take a few switch intervals to get
    // there. Each dump is a fresh observation: look until it is there.
    let deadline = std::time::Instant::now() + crate::support::LINE_TIMEOUT;
    let d = loop {
        let d = dump(py.pid(), &DumpOptions::default()).expect("dump");
        let blocked = d.python_processes().any(|(_, s)| {
            s.threads
                .iter()
                .any(|t| t.name.as_deref() == Some("MainThread") && !t.active)
        });
        if blocked || std::time::Instant::now() > deadline {
            break d;
        }
    };
    let (p, stacks) = d.python_processes().next().expect("the process itself");
    assert_eq!(p.pid, py.pid());
    assert!(stacks.version.starts_with('3'), "{}", stacks.version);

    let main = stacks
        .threads
        .iter()
        .find(|t| t.name.as_deref() == Some("MainThread"))
        .expect("MainThread");
    assert!(!main.active, "MainThread waits on an event: idle\n{main}");
    let hang_line = line_of("hang_in_named_function.py", "# HANG");
    let frame = main
        .frames
        .iter()
        .find(|f| f.name == "hang_here_for_the_dump")
        .unwrap_or_else(|| panic!("no hang frame in {main}"));
    assert_eq!(frame.short_filename, "hang_in_named_function.py");
    assert!(
        frame
            .filename
            .ends_with("tests/fixtures/hang_in_named_function.py")
    );
    assert_eq!(frame.line, hang_line);

    let spinner = stacks
        .threads
        .iter()
        .find(|t| t.name.as_deref() == Some("spinner"))
        .expect("the spinner thread by name");
    assert_eq!(spinner.frames[0].name, "spin_forever");
    assert!(spinner.active, "{spinner}");

    let text = d.to_string();
    let want = format!("hang_here_for_the_dump (hang_in_named_function.py:{hang_line})");
    assert!(text.contains(&want), "{want} not in:\n{text}");
    assert!(
        text.starts_with(&format!("Process {}: ", py.pid())),
        "{text}"
    );
    assert!(text.contains("(idle): \"MainThread\""), "{text}");
    assert!(text.contains(": \"spinner\""), "{text}");
}

#[test]
fn a_parent_waiting_on_a_python_child_shows_both_stacks() {
    let py = Py::start("parent_waits_on_child.py", &[]);
    py.expect_line("child hanging");

    let d = dump(py.pid(), &DumpOptions::default()).expect("dump");
    let read: Vec<_> = d.python_processes().collect();
    assert_eq!(read.len(), 2, "parent and child:\n{d}");
    let (parent, parent_stacks) = read[0];
    let (child, child_stacks) = read[1];
    assert_eq!(parent.pid, py.pid());
    assert_eq!(child.parent, Some(py.pid()));
    assert!(
        child.command.ends_with("parent_waits_on_child.py child"),
        "{}",
        child.command
    );

    let names = |s: &pystacks::PythonStacks| -> Vec<String> {
        s.threads
            .iter()
            .flat_map(|t| t.frames.iter().map(|f| f.name.clone()))
            .collect()
    };
    assert!(
        names(parent_stacks).contains(&"wait_for_the_child".to_owned()),
        "{d}"
    );
    let hang = child_stacks.threads[0]
        .frames
        .iter()
        .find(|f| f.name == "hang_in_the_child")
        .unwrap_or_else(|| panic!("no child frame in:\n{d}"));
    assert_eq!(hang.line, line_of("parent_waits_on_child.py", "# HANG"));

    let text = d.to_string();
    assert!(
        text.contains(&format!("Parent Process {}", py.pid())),
        "{text}"
    );

    // Without subprocesses, only the parent.
    let only = dump(
        py.pid(),
        &DumpOptions {
            subprocesses: false,
            ..DumpOptions::default()
        },
    )
    .expect("dump");
    assert_eq!(only.processes.len(), 1);
}

#[test]
fn a_launcher_that_is_not_python_shows_its_python_child() {
    // sh starts Python and waits on it (no exec: `; exit` keeps sh alive).
    let script = format!(
        "{} {} ; exit 3",
        crate::support::python().display(),
        crate::support::fixture("hang_in_named_function.py").display()
    );
    let mut sh = std::process::Command::new("sh")
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    let mut out = std::io::BufReader::new(sh.stdout.take().expect("piped"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).expect("read");
    assert_eq!(line.trim(), "hanging");

    let d = dump(sh.id(), &DumpOptions::default());
    // Kill the Python child (sh's only child), then sh.
    for (pid, _) in d
        .as_ref()
        .map(|d| {
            d.processes
                .iter()
                .filter_map(|p| p.parent.map(|pp| (p.pid, pp)))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
    {
        // SAFETY: kill(2) on a descendant we started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    let _ = sh.kill();
    let _ = sh.wait();

    let d = d.expect("dump");
    assert!(
        matches!(d.processes[0].outcome, Err(Error::NotPython { .. })),
        "{d}"
    );
    assert_eq!(d.python_processes().count(), 1, "{d}");
    let text = d.to_string();
    assert!(text.contains("hang_here_for_the_dump"), "{text}");
    // The launcher's own thread, listed by name and state, not unwound.
    assert!(text.contains("Native (not Python): "), "{text}");
    assert!(
        text.contains(&format!("Thread {} (idle): \"sh\"", sh.id())),
        "{text}"
    );
    let wait = d.parent_wait().expect("a launcher above a Python process");
    assert_eq!(wait.workers.len(), 1, "{text}");
}

#[test]
fn a_dump_past_its_timeout_is_a_timeout_error() {
    let py = Py::start("hang_in_named_function.py", &[]);
    py.expect_line("hanging");
    // Attaching alone parses the interpreter's binary: never instant.
    let err = dump(
        py.pid(),
        &DumpOptions::with_timeout(std::time::Duration::ZERO),
    )
    .expect_err("no time to read");
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert_eq!(err.pid(), Some(py.pid()));
    assert!(
        err.to_string().contains("retry with a longer timeout"),
        "{err}"
    );
}
