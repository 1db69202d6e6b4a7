//! Native (C) frames: with the `native` feature, a worker busy inside a C
//! call (zlib's compressor) shows the C frames under its Python frame;
//! without it, asking for them is an error that says how to get them.

use pystacks::{DumpOptions, Error, dump};

/// Run by a build without the feature (`cargo nextest run`); `cargo xtask
/// test` builds the suite with it, and checks the same errors through the
/// wheel's coldstart (`dump --native`, `record --native`).
#[cfg(not(feature = "native"))]
#[test]
fn native_frames_in_a_build_without_the_feature_say_how_to_get_them() {
    use pystacks::{Sampler, SamplerOptions};
    let options = DumpOptions {
        native: true,
        ..DumpOptions::default()
    };
    let err = dump(std::process::id(), &options).expect_err("no native feature");
    assert!(matches!(err, Error::NativeUnavailable), "{err}");
    let text = err.to_string();
    assert!(text.contains("libunwind-dev"), "{text}");
    assert!(text.contains("--features native"), "{text}");
    let sampling = SamplerOptions {
        native: true,
        ..SamplerOptions::default()
    };
    let err = Sampler::start(std::process::id(), sampling).expect_err("no native feature");
    assert!(matches!(err, Error::NativeUnavailable), "{err}");
}

#[cfg(feature = "native")]
mod with_the_feature {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    use super::*;
    use crate::support::{Py, fixture, python, wait_until_gone};

    /// The fixture started by a shell (so it is not this process's child,
    /// which native reads refuse), its pid read from its first line; the
    /// shell's group killed and reaped on drop.
    struct Grandchild {
        sh: std::process::Child,
        pid: u32,
    }

    impl Grandchild {
        fn start(fixture_name: &str) -> Grandchild {
            let mut sh = Command::new("sh")
                .args(["-c", "exec 3<&0; \"$0\" \"$1\" <&3 3<&- & exec 3<&-; wait"])
                .arg(python())
                .arg(fixture(fixture_name))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .process_group(0)
                .spawn()
                .expect("sh runs");
            let mut line = String::new();
            BufReader::new(sh.stdout.take().expect("piped"))
                .read_line(&mut line)
                .expect("a line");
            let pid = line
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("no pid in {line:?}"));
            Grandchild { sh, pid }
        }
    }

    impl Drop for Grandchild {
        fn drop(&mut self) {
            // SAFETY: kill(2) on the group of a shell we started.
            unsafe { libc::kill(-(self.sh.id() as i32), libc::SIGKILL) };
            let _ = self.sh.wait();
        }
    }

    #[test]
    fn a_worker_inside_zlib_shows_the_c_frames_under_its_python_frame() {
        let worker = Grandchild::start("compress_in_a_loop.py");
        let options = DumpOptions {
            native: true,
            subprocesses: false,
            ..DumpOptions::default()
        };
        // A read can land between two calls, in Python code: a few tries.
        let mut last = String::new();
        let found = (0..40).find_map(|_| {
            let d = dump(worker.pid, &options).expect("dump with native frames");
            last = d.to_string();
            let (_, stacks) = d.python_processes().next()?;
            let main = stacks.threads.iter().find(|t| t.active)?;
            let python = main
                .frames
                .iter()
                .position(|f| f.name == "compress_in_a_loop")?;
            // Innermost first: the C frames come before the Python one.
            main.frames[..python]
                .iter()
                .find(|f| f.short_filename.contains(".so") || f.name.contains("deflate"))
                .cloned()
        });
        let frame = found.unwrap_or_else(|| panic!("no native frame under the loop:\n{last}"));
        println!("{last}");
        assert_eq!(frame.line, 0, "{frame:?}");
        let worker_pid = worker.pid;
        drop(worker);
        assert!(wait_until_gone(worker_pid), "the worker is left running");
    }

    #[test]
    fn native_frames_of_this_process_s_own_child_are_refused_with_the_way_round() {
        let py = Py::start("hang_in_named_function.py", &[]);
        py.expect_line("hanging");
        let options = DumpOptions {
            native: true,
            ..DumpOptions::default()
        };
        let err = dump(py.pid(), &options).expect_err("own child");
        assert!(matches!(err, Error::NativeOfChild { .. }), "{err}");
        assert!(err.to_string().contains("coldstart dump"), "{err}");
    }
}
