//! The unit tests' frames: one builder for the crate's own [`Frame`] and
//! one for the py-spy frames it reads, with what no test looks at filled
//! in.

use crate::Frame;

/// A frame of `name` in `file` (under `/src/`) at `line`.
pub(crate) fn frame(name: &str, file: &str, line: u32) -> Frame {
    Frame {
        name: name.into(),
        filename: format!("/src/{file}"),
        short_filename: file.into(),
        line,
    }
}

/// A frame as py-spy reads it: a native one when `module` (the library
/// it is in) is given, else a Python one of `app.py`; `is_entry` when
/// the eval loop was entered there from C.
pub(crate) fn spy_frame(name: &str, module: Option<&str>, is_entry: bool) -> py_spy::Frame {
    py_spy::Frame {
        name: name.to_owned(),
        filename: module.unwrap_or("app.py").to_owned(),
        module: module.map(str::to_owned),
        short_filename: None,
        line: if module.is_some() { 0 } else { 3 },
        locals: None,
        is_entry,
        is_shim_entry: false,
    }
}

/// A shell running `script` (with `args` as `$0`, `$1`...), its stdin and
/// stdout piped, returned once it has printed `up`: its exec is done then,
/// so /proc shows its own command line (right after a spawn it may still
/// show this test's, or none while the kernel sets it up). Its stdout is
/// returned to read further.
pub(crate) fn shell(
    script: &str,
    args: &[&str],
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
) {
    use std::io::BufRead;
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("echo up\n{script}"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sh runs");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("its stdout"));
    let mut up = String::new();
    out.read_line(&mut up).expect("its first line");
    assert_eq!(up, "up\n", "the shell speaks");
    (child, out)
}
