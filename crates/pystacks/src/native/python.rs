//! A Python process's native frames read with this crate's own unwinder
//! (framehop, its files kept between reads) instead of py-spy's (the
//! system's libunwind over ptrace, which reads `/proc/PID/maps` again, maps
//! the file and reads the stack a word a system call at each read), then
//! merged under the Python frames as py-spy merges them: each
//! `_PyEval_EvalFrameDefault` frame replaced by the Python frames it runs.
//!
//! The caller stops the process while it reads a thread's Python frames
//! and unwinds its native ones ([`PythonNative::unwind`]), so both are of
//! one moment; symbols are looked up and the frames merged after it is let
//! go ([`PythonNative::merge`]), each address looked up once.

use std::collections::HashMap;
use std::ops::Range;

use py_spy::{PythonSpy, StackTrace};
use remoteprocess::StackFrame;

use super::stop::Stopped;
use super::unwind::Inner;
use crate::error::Error;
use crate::procfs;

/// What an address's native frame becomes in a merged stack.
#[derive(Debug, Clone)]
enum Merge {
    /// An interpreter function left out (the Python frames tell it).
    Ignore,
    /// The interpreter's eval loop: the Python frames it runs go here.
    Python,
    /// A native frame kept as it is.
    Native(py_spy::Frame),
}

/// The native half of a Python process's reads, kept between them.
pub(crate) struct PythonNative {
    inner: Inner,
    /// The executable mappings of the interpreter (its binary, and
    /// libpython where it is a shared library).
    interpreter: Vec<Range<u64>>,
    /// Each address's frames (inlined calls give several), by address.
    merges: HashMap<u64, Vec<Merge>>,
    cython: super::cython::SourceMaps,
    /// The process's mappings as last read, to tell a return address
    /// from one the unwinder took off the stack by mistake.
    regions: Regions,
    /// Whether an address lay in no mapping known: a library loaded since,
    /// so the files are read again before the next stop.
    new_files: bool,
}

/// A process's mappings as `/proc/PID/maps` gave them, sorted, each with
/// whether it is executable.
#[derive(Debug, Default)]
struct Regions(Vec<(Range<u64>, bool)>);

impl Regions {
    /// `pid`'s mappings now (none when they cannot be read).
    fn of(pid: u32) -> Regions {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        Regions::parse(&maps)
    }

    fn parse(maps: &str) -> Regions {
        let mut regions: Vec<(Range<u64>, bool)> = maps
            .lines()
            .filter_map(super::modules::maps_line)
            .map(|(range, _, executable, _)| (range, executable))
            .collect();
        regions.sort_by_key(|(r, _)| r.start);
        Regions(regions)
    }

    /// Whether `addr` is in an executable mapping (`Some(true)`), in one
    /// that is not (`Some(false)`: a stack or heap address, never a return
    /// address), or in none (`None`: mapped since the last read, or
    /// nothing).
    fn executable(&self, addr: u64) -> Option<bool> {
        let i = self.0.partition_point(|(r, _)| r.start <= addr);
        let (range, x) = self.0.get(i.checked_sub(1)?)?;
        range.contains(&addr).then_some(*x)
    }
}

impl PythonNative {
    /// Ready to unwind `pid`, a Python process.
    pub(crate) fn attach(pid: u32) -> Result<PythonNative, Error> {
        Ok(PythonNative {
            inner: Inner::new(pid)?,
            interpreter: interpreter_ranges(pid),
            merges: HashMap::new(),
            cython: super::cython::SourceMaps::default(),
            regions: Regions::of(pid),
            new_files: false,
        })
    }

    /// Every Python thread of `spy`'s process with its native frames: the
    /// process stopped (every thread) while each thread's Python frames
    /// are read and its native stack unwound, then let go, and the two
    /// merged. A thread runs when the kernel said so before the stop and
    /// its innermost Python frame is not a known wait, as py-spy judges.
    pub(crate) fn traces(&mut self, spy: &mut PythonSpy) -> anyhow::Result<Vec<StackTrace>> {
        self.prepare(spy.pid as u32);
        // The states first: a stopped thread reads as stopped.
        let running: HashMap<u64, bool> = procfs::task_states(spy.pid as u32)
            .into_iter()
            .map(|(tid, state)| (u64::from(tid), state == 'R'))
            .collect();
        let (traces, stacks) = {
            let _stopped = Stopped::all(spy.pid as u32)?;
            let traces = spy.get_stack_traces()?;
            let stacks: Vec<Option<Vec<u64>>> = traces
                .iter()
                .map(|t| t.os_thread_id.map(|tid| self.unwind(tid as u32)))
                .collect();
            (traces, stacks)
        };
        traces
            .into_iter()
            .zip(stacks)
            .map(|(mut trace, stack)| {
                let (Some(tid), Some(stack)) = (trace.os_thread_id, stack) else {
                    anyhow::bail!("failed to get os threadid");
                };
                trace.active =
                    running.get(&tid).copied().unwrap_or(true) && !waits_in_python(&trace.frames);
                trace.frames = self.merge(&trace.frames, &stack)?;
                Ok(trace)
            })
            .collect()
    }

    /// Before a stop: the files loaded since the last read, if one of its
    /// addresses lay outside those known.
    fn prepare(&mut self, pid: u32) {
        if std::mem::take(&mut self.new_files) {
            self.inner.add_new_files();
            self.regions = Regions::of(pid);
        }
    }

    /// The native stack of thread `tid`, which the caller stopped: return
    /// addresses, innermost first, ending where the unwinder could not
    /// follow the stack, or at an address no executable mapping holds (in
    /// hand-written code without unwind tables the unwinder can take a
    /// stack address for a return address; what it finds past one is not
    /// the stack either). An address in no mapping known asks for the
    /// files to be read again before the next stop.
    fn unwind(&mut self, tid: u32) -> Vec<u64> {
        let mut addresses = self.inner.addresses(tid);
        if addresses.last() == Some(&0) {
            addresses.pop();
        }
        let regions = &self.regions;
        if let Some(cut) = addresses
            .iter()
            .position(|a| regions.executable(*a) != Some(true))
        {
            if regions.executable(addresses[cut]).is_none() {
                self.new_files = true;
            }
            addresses.truncate(cut);
        }
        addresses
    }

    /// One thread's Python frames (innermost first, as py-spy read them)
    /// merged with its native stack, as py-spy merges them: native frames
    /// kept, the interpreter's own left out but for its eval loop, each
    /// replaced by the Python frames it runs (through the next entry frame
    /// from 3.11 on). `Err` when the stacks do not agree.
    fn merge(
        &mut self,
        python: &[py_spy::Frame],
        native: &[u64],
    ) -> Result<Vec<py_spy::Frame>, anyhow::Error> {
        // An address no symbol covers is looked up again at the next read
        // (its library may be loaded since).
        let mut unknown = HashMap::new();
        for addr in native {
            if !self.merges.contains_key(addr) {
                match self.look_up(*addr) {
                    Ok(merges) => self.merges.insert(*addr, merges),
                    Err(frames) => unknown.insert(*addr, frames),
                };
            }
        }
        let native = native
            .iter()
            .filter_map(|addr| self.merges.get(addr).or_else(|| unknown.get(addr)))
            .flatten();
        merge_stacks(python, native)
    }

    /// What the frames at `addr` become in a merged stack; `Err` with the
    /// one frame that stands for it when no symbol covers it.
    fn look_up(&mut self, addr: u64) -> Result<Vec<Merge>, Vec<Merge>> {
        let in_interpreter = self.interpreter.iter().any(|r| r.contains(&addr));
        let mut frames: Vec<StackFrame> = Vec::new();
        let found = self
            .inner
            .symbolicator
            .symbolicate(addr, !in_interpreter, &mut |f| frames.push(f.clone()));
        if let Err(e) = found {
            if matches!(e, remoteprocess::Error::NoBinaryForAddress(_)) {
                self.new_files = true;
            }
            return Err(vec![Merge::Native(py_spy::Frame {
                filename: "?".to_owned(),
                name: format!("{addr:#x}"),
                line: 0,
                short_filename: None,
                module: None,
                locals: None,
                is_entry: true,
                is_shim_entry: true,
            })]);
        }
        Ok(frames
            .iter()
            .map(|f| self.merge_of(in_interpreter, f))
            .collect())
    }

    fn merge_of(&mut self, in_interpreter: bool, frame: &StackFrame) -> Merge {
        if in_interpreter {
            match frame.function.as_deref().map(interpreter_function) {
                Some(Some(InInterpreter::EvalLoop)) => return Merge::Python,
                Some(Some(InInterpreter::Kept)) => {}
                _ => return Merge::Ignore,
            }
        }
        match native_frame(frame) {
            Some(mut f) => {
                self.cython.translate(&mut f);
                Merge::Native(f)
            }
            None => Merge::Ignore,
        }
    }
}

/// py-spy's merge of one thread's Python frames with what its native
/// frames became, both innermost first.
fn merge_stacks<'m>(
    python: &[py_spy::Frame],
    native: impl Iterator<Item = &'m Merge>,
) -> Result<Vec<py_spy::Frame>, anyhow::Error> {
    let mut at = 0;
    let mut merged = Vec::new();
    for m in native {
        match m {
            Merge::Ignore => {}
            Merge::Native(frame) => merged.push(frame.clone()),
            Merge::Python => {
                while at < python.len() {
                    merged.push(python[at].clone());
                    if python[at].is_entry || python[at].is_shim_entry {
                        break;
                    }
                    at += 1;
                }
                at += 1;
            }
        }
    }
    if at != python.len() {
        if at == 0 {
            // The native stack ended before the eval loop (a library
            // without unwind information): the Python frames go under.
            merged.extend(python.iter().cloned());
        } else if at != python.len() + 1 {
            // One eval frame more than Python frames is a frame being
            // left; any other count is a stack read wrong.
            anyhow::bail!(
                "Failed to merge native and python frames (Have {at} native and {} python)",
                python.len()
            );
        }
    }
    Ok(merged)
}

/// Whether a thread's innermost Python frame is a wait py-spy knows
/// (`threading`'s `wait`, a selector's `select`, an event loop's `poll`).
fn waits_in_python(frames: &[py_spy::Frame]) -> bool {
    frames.first().is_some_and(|f| {
        (f.name == "wait" && f.filename.ends_with("threading.py"))
            || (f.name == "select" && f.filename.ends_with("selectors.py"))
            || (f.name == "poll"
                && (f.filename.ends_with("asyncore.py")
                    || f.filename.contains("zmq")
                    || f.filename.contains("gevent")
                    || f.filename.contains("tornado")))
    })
}

/// An interpreter function that a merged stack shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InInterpreter {
    /// The eval loop, where its Python frames go.
    EvalLoop,
    /// A builtin a reader wants to see (`time.sleep`, a lock's wait, the
    /// collector), kept as a native frame.
    Kept,
}

/// How an interpreter function merges; `None` is left out (the Python
/// frames tell it).
fn interpreter_function(function: &str) -> Option<InInterpreter> {
    // By the first word of the name (`_PyEval_EvalFrameDefault.cold.2`
    // is split at `_` and `.`).
    const KEPT: [&str; 11] = [
        "time",
        "sys",
        "gc",
        "os",
        "unicode",
        "thread",
        "stringio",
        "sre",
        "PyGilState",
        "PyThread",
        "lock",
    ];
    let mut words = function.split(['_', '.']).filter(|w| !w.is_empty());
    match words.next()? {
        "PyEval" => matches!(words.next()?, "EvalFrameDefault" | "EvalFrameEx")
            .then_some(InInterpreter::EvalLoop),
        first if KEPT.contains(&first) => Some(InInterpreter::Kept),
        _ => None,
    }
}

/// A native frame as py-spy writes it (C++ names demangled without their
/// parameters, Cython's prefixes cut, a source file resolved beside its
/// library), or `None` for the frames every thread starts with and
/// Cython's call helpers.
fn native_frame(frame: &StackFrame) -> Option<py_spy::Frame> {
    let module = Some(frame.module.clone());
    let Some(function) = &frame.function else {
        return Some(py_spy::Frame {
            filename: frame.module.clone(),
            name: format!("{:#x}", frame.addr),
            line: 0,
            short_filename: None,
            module,
            locals: None,
            is_entry: true,
            is_shim_entry: true,
        });
    };
    if is_thread_start(function, &frame.module) {
        return None;
    }
    let filename = match &frame.filename {
        Some(file) => {
            super::cython::resolve_filename(file, &frame.module).unwrap_or_else(|| file.clone())
        }
        None => frame.module.clone(),
    };
    let demangled = function
        .starts_with('_')
        .then(|| cpp_name(function))
        .flatten();
    let name = demangled.as_deref().unwrap_or(function);
    if super::cython::ignore_frame(name) {
        return None;
    }
    Some(py_spy::Frame {
        filename,
        line: frame.line.and_then(|l| i32::try_from(l).ok()).unwrap_or(0),
        name: super::cython::demangle(name).to_owned(),
        short_filename: None,
        module,
        locals: None,
        is_entry: true,
        is_shim_entry: true,
    })
}

/// A C++ symbol's name without its parameters and return type.
fn cpp_name(symbol: &str) -> Option<String> {
    let (sym, _) = cpp_demangle::BorrowedSymbol::with_tail(symbol.as_bytes()).ok()?;
    let options = cpp_demangle::DemangleOptions::new()
        .no_params()
        .no_return_type();
    sym.demangle_with_options(&options).ok()
}

/// The libc frames every stack starts with.
fn is_thread_start(function: &str, module: &str) -> bool {
    (function == "__libc_start_main" && module.contains("/libc"))
        || (function == "__clone" && module.contains("/libc"))
        || (function == "start_thread" && module.contains("/libpthread"))
}

/// The executable mappings of `pid`'s interpreter: its executable's, and
/// libpython's where it is a shared library (what py-spy calls the
/// interpreter's frames by).
fn interpreter_ranges(pid: u32) -> Vec<Range<u64>> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let executable: Vec<(Range<u64>, &str)> = maps
        .lines()
        .filter_map(super::modules::maps_line)
        .filter(|&(_, _, executable, path)| executable && !path.is_empty())
        .map(|(range, _, _, path)| (range, path))
        .collect();
    let first = |matches: &dyn Fn(&str) -> bool| {
        executable
            .iter()
            .find(|(_, path)| matches(path))
            .map(|(r, _)| r.clone())
    };
    first(&|p| p == exe)
        .into_iter()
        .chain(first(&py_spy::python_process_info::is_python_lib))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_address_is_no_return_address_and_an_unmapped_one_is_unknown() {
        let regions = Regions::parse(
            "7f0000000000-7f0000001000 r-xp 00000000 08:01 42 /usr/lib/libtorch_cpu.so\n\
             7f0000001000-7f0000002000 r--p 00001000 08:01 42 /usr/lib/libtorch_cpu.so\n\
             7ffe00000000-7ffe00021000 rw-p 00000000 00:00 0 [stack]\n\
             7fff00000000-7fff00002000 r-xp 00000000 00:00 0 [vdso]\n",
        );
        assert_eq!(regions.executable(0x7f00_0000_0800), Some(true));
        assert_eq!(regions.executable(0x7f00_0000_1800), Some(false));
        assert_eq!(regions.executable(0x7ffe_0001_0000), Some(false));
        assert_eq!(regions.executable(0x7fff_0000_0010), Some(true));
        assert_eq!(regions.executable(0x5000), None);
        assert_eq!(regions.executable(0x7ffe_0002_1000), None);
    }

    use crate::testing::spy_frame as frame;

    fn names(frames: &[py_spy::Frame]) -> Vec<&str> {
        frames.iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn each_eval_loop_runs_the_python_frames_up_to_its_entry_frame() {
        // Python 3.11+: `inner` and `middle` run in one eval loop (only
        // `middle` was entered from C), `outer` in the next.
        let python = [
            frame("inner", None, false),
            frame("middle", None, true),
            frame("outer", None, true),
        ];
        let deflate = Merge::Native(frame("deflate", Some("/lib/libz.so.1"), true));
        let main = Merge::Native(frame("main", Some("/usr/bin/python3"), true));
        let native = [
            deflate,
            Merge::Ignore,
            Merge::Python,
            Merge::Ignore,
            Merge::Python,
            main,
        ];
        let merged = merge_stacks(&python, native.iter()).unwrap();
        assert_eq!(
            names(&merged),
            ["deflate", "inner", "middle", "outer", "main"]
        );
    }

    #[test]
    fn stacks_that_do_not_agree_are_kept_whole_or_refused_as_py_spy_does() {
        let python = [frame("f", None, true), frame("g", None, true)];
        // No eval loop unwound: the Python frames under the native ones.
        let libz = [Merge::Native(frame(
            "deflate",
            Some("/lib/libz.so.1"),
            true,
        ))];
        let merged = merge_stacks(&python, libz.iter()).unwrap();
        assert_eq!(names(&merged), ["deflate", "f", "g"]);
        // One eval loop more than Python frames: a frame being left.
        let three = [Merge::Python, Merge::Python, Merge::Python];
        assert_eq!(
            names(&merge_stacks(&python, three.iter()).unwrap()),
            ["f", "g"]
        );
        // Fewer loops than frames: the stack was read wrong.
        let err = merge_stacks(&python, [Merge::Python].iter()).unwrap_err();
        assert!(err.to_string().contains("Failed to merge"), "{err}");
    }

    #[test]
    fn the_eval_loop_and_wanted_builtins_are_told_apart_from_the_rest() {
        for name in [
            "_PyEval_EvalFrameDefault",
            "_PyEval_EvalFrameDefault.cold.12",
        ] {
            assert_eq!(interpreter_function(name), Some(InInterpreter::EvalLoop));
        }
        for name in [
            "time_sleep",
            "PyThread_acquire_lock_timed",
            "gc_collect_main",
        ] {
            assert_eq!(interpreter_function(name), Some(InInterpreter::Kept));
        }
        for name in ["_PyObject_MakeTpCall", "PyEval_EvalCode", "main"] {
            assert_eq!(interpreter_function(name), None, "{name}");
        }
    }

    #[test]
    fn a_thread_in_a_known_python_wait_is_idle() {
        let mut wait = frame("wait", None, true);
        wait.filename = "/usr/lib/python3.11/threading.py".to_owned();
        assert!(waits_in_python(&[wait]));
        assert!(!waits_in_python(&[frame("wait", None, true)]));
        assert!(!waits_in_python(&[]));
    }
}
