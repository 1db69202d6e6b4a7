//! One process's threads stopped, unwound and symbolized.

use std::collections::HashMap;

use remoteprocess::{Process, StackFrame, Symbolicator};

use super::{MAX_FRAMES, UNKNOWN_FRAME, demangle, short_source, thread};
use crate::error::Error;
use crate::procfs;
use crate::stack::{Frame, ThreadStack};

/// The unwinder and symbolizer of one process, kept between reads.
pub(super) struct Inner {
    process: Process,
    #[cfg(target_arch = "x86_64")]
    unwinder: framehop::x86_64::UnwinderX86_64<super::modules::Bytes>,
    #[cfg(target_arch = "x86_64")]
    cache: framehop::x86_64::CacheX86_64,
    /// The address ranges of the files the unwinder knows.
    #[cfg(target_arch = "x86_64")]
    modules: Vec<std::ops::Range<u64>>,
    pub(super) symbolicator: Symbolicator,
    /// Frames by address (inlined calls give several).
    frames: HashMap<u64, Vec<Frame>>,
    /// The buffer a stack's top is read into, kept between threads.
    #[cfg(target_arch = "x86_64")]
    stack: Vec<u8>,
}

fn native(pid: u32, e: remoteprocess::Error) -> Error {
    Error::classify_native(pid, &anyhow::Error::new(e))
}

impl Inner {
    pub(super) fn new(pid: u32) -> Result<Inner, Error> {
        if !cfg!(target_arch = "x86_64") {
            return Err(Error::NativeRead {
                pid,
                detail: "the native stacks of a process that is not Python are read on x86_64 only"
                    .to_owned(),
            });
        }
        let process = Process::new(pid as remoteprocess::Pid).map_err(|e| native(pid, e))?;
        let symbolicator = process.symbolicator().map_err(|e| native(pid, e))?;
        #[cfg(target_arch = "x86_64")]
        let (unwinder, modules) = super::modules::unwinder(pid);
        Ok(Inner {
            process,
            #[cfg(target_arch = "x86_64")]
            unwinder,
            #[cfg(target_arch = "x86_64")]
            cache: framehop::x86_64::CacheX86_64::new(),
            #[cfg(target_arch = "x86_64")]
            modules,
            symbolicator,
            frames: HashMap::new(),
            #[cfg(target_arch = "x86_64")]
            stack: vec![0; STACK_WINDOW],
        })
    }

    /// Every thread's stack: the process stopped (every thread) while the
    /// return addresses are read, then let go and symbolized. With
    /// `running_only`, only the threads running when listed are stopped,
    /// each on its own, and unwound: a sleeping thread is idle whatever
    /// its stack, and a sampler that leaves idle threads out needs none.
    pub(super) fn threads(
        &mut self,
        pid: u32,
        running_only: bool,
    ) -> Result<Vec<ThreadStack>, Error> {
        // The states first: a stopped thread reads as stopped.
        let tasks = procfs::tasks(pid);
        if tasks.is_empty() {
            return Err(Error::ProcessGone { pid });
        }
        let addresses = if running_only {
            tasks
                .iter()
                .map(|t| {
                    if t.state != 'R' {
                        return Vec::new();
                    }
                    match super::stop::Stopped::thread(pid, t.tid) {
                        Ok(_stopped) => self.addresses(t.tid),
                        // Gone since it was listed, or exiting.
                        Err(_) => vec![0],
                    }
                })
                .collect::<Vec<_>>()
        } else {
            let _stopped =
                super::stop::Stopped::all(pid).map_err(|e| Error::classify_native(pid, &e))?;
            tasks
                .iter()
                .map(|t| self.addresses(t.tid))
                .collect::<Vec<_>>()
        };
        let mut reloaded = false;
        Ok(tasks
            .iter()
            .zip(addresses)
            .map(|(task, addrs)| {
                let frames = addrs
                    .iter()
                    .flat_map(|addr| self.frames_at(*addr, &mut reloaded))
                    .collect();
                thread(task, frames)
            })
            .collect())
    }

    /// Makes the files mapped since the unwinder was made known to it, and
    /// the symbolizer read the process's files again.
    pub(super) fn add_new_files(&mut self) {
        #[cfg(target_arch = "x86_64")]
        super::modules::add_new(
            self.process.pid as u32,
            &mut self.unwinder,
            &mut self.modules,
        );
        let _ = self.symbolicator.reload();
    }

    /// The addresses to look up of one stopped thread, innermost first (a
    /// return address less one, so it lies in its call); a stack that
    /// could not be followed to its end ends in 0 (one [`UNKNOWN_FRAME`]).
    #[cfg(target_arch = "x86_64")]
    pub(super) fn addresses(&mut self, tid: u32) -> Vec<u64> {
        use framehop::Unwinder;
        use framehop::x86_64::UnwindRegsX86_64;
        use remoteprocess::ProcessMemory;

        let Some(regs) = registers(tid) else {
            return vec![0];
        };
        // The top of the stack in one read; a word past it is read alone.
        let window = StackWindow::read(self.process.pid, regs.rsp, &mut self.stack);
        let process = &self.process;
        let mut read_stack = |addr: u64| {
            window.word(addr).map_or_else(
                || process.copy_struct::<u64>(addr as usize).map_err(|_| ()),
                Ok,
            )
        };
        let mut frames = self.unwinder.iter_frames(
            regs.rip,
            UnwindRegsX86_64::new(regs.rip, regs.rsp, regs.rbp),
            &mut self.cache,
            &mut read_stack,
        );
        let mut out = Vec::new();
        while out.len() < MAX_FRAMES {
            match frames.next() {
                Ok(Some(frame)) => out.push(frame.address_for_lookup()),
                Ok(None) => break,
                Err(_) => {
                    out.push(0);
                    break;
                }
            }
        }
        out
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub(super) fn addresses(&mut self, _tid: u32) -> Vec<u64> {
        vec![0]
    }

    fn frames_at(&mut self, addr: u64, reloaded: &mut bool) -> Vec<Frame> {
        if let Some(frames) = self.frames.get(&addr) {
            return frames.clone();
        }
        let mut frames = Vec::new();
        let mut found = self.symbolicate(addr, &mut frames);
        if !found && !*reloaded && addr != 0 {
            // A library loaded since the symbols were read.
            *reloaded = true;
            if self.symbolicator.reload().is_ok() {
                frames.clear();
                found = self.symbolicate(addr, &mut frames);
            }
        }
        if !found {
            frames = vec![Frame {
                name: UNKNOWN_FRAME.to_owned(),
                filename: format!("{addr:#x}"),
                short_filename: "?".to_owned(),
                line: 0,
            }];
        }
        self.frames.insert(addr, frames.clone());
        frames
    }

    fn symbolicate(&self, addr: u64, frames: &mut Vec<Frame>) -> bool {
        if addr == 0 {
            return false;
        }
        let found = self
            .symbolicator
            .symbolicate(addr, true, &mut |sf| frames.push(frame(sf)))
            .is_ok()
            && !frames.is_empty();
        // Debug info of line tables only names the inlined calls, not the
        // function they are inlined into (the last, outermost frame): its
        // name is the symbol's.
        if let Some(outer) = frames.last_mut().filter(|f| f.name == UNKNOWN_FRAME) {
            let _ = self.symbolicator.symbolicate(addr, false, &mut |sf| {
                if let Some(name) = &sf.function {
                    outer.name = demangle(name);
                }
            });
        }
        found
    }
}

/// How much of a stack is read at once from its pointer up: the frames
/// of most stacks, in one system call instead of one a word.
#[cfg(target_arch = "x86_64")]
const STACK_WINDOW: usize = 64 * 1024;

/// The top of one thread's stack, read at once.
#[cfg(target_arch = "x86_64")]
struct StackWindow<'b> {
    start: u64,
    bytes: &'b [u8],
}

#[cfg(target_arch = "x86_64")]
impl StackWindow<'_> {
    /// Up to `buffer`'s length of bytes from `sp` (fewer where the
    /// mapping ends: the read stops at the first unmapped byte).
    fn read(pid: remoteprocess::Pid, sp: u64, bytes: &mut [u8]) -> StackWindow<'_> {
        let local = libc::iovec {
            iov_base: bytes.as_mut_ptr().cast(),
            iov_len: bytes.len(),
        };
        let remote = libc::iovec {
            iov_base: sp as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: one local iovec over `bytes`, which outlives the call;
        // the remote one is only read, by the kernel, with its checks.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        let n = usize::try_from(n).unwrap_or(0).min(bytes.len());
        StackWindow {
            start: sp,
            bytes: &bytes[..n],
        }
    }

    fn word(&self, addr: u64) -> Option<u64> {
        let at = usize::try_from(addr.checked_sub(self.start)?).ok()?;
        let word = self.bytes.get(at..at.checked_add(8)?)?;
        Some(u64::from_ne_bytes(word.try_into().ok()?))
    }
}

/// The registers of a thread stopped by this process (ptrace).
#[cfg(target_arch = "x86_64")]
fn registers(tid: u32) -> Option<libc::user_regs_struct> {
    let mut regs = std::mem::MaybeUninit::<libc::user_regs_struct>::zeroed();
    // SAFETY: PTRACE_GETREGS writes one user_regs_struct to the pointer;
    // the thread is ptrace-stopped by this process (the lock).
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGS,
            tid as libc::pid_t,
            std::ptr::null_mut::<libc::c_void>(),
            regs.as_mut_ptr(),
        )
    };
    // SAFETY: zeroed is a valid user_regs_struct; the call filled it on 0.
    (rc == 0).then(|| unsafe { regs.assume_init() })
}

fn frame(sf: &StackFrame) -> Frame {
    let module = sf.module.rsplit('/').next().unwrap_or(&sf.module);
    let name = sf
        .function
        .as_deref()
        .map_or_else(|| UNKNOWN_FRAME.to_owned(), demangle);
    let (filename, short, line) = match &sf.filename {
        Some(file) => (
            file.clone(),
            short_source(file),
            sf.line.and_then(|l| u32::try_from(l).ok()).unwrap_or(0),
        ),
        None => (sf.module.clone(), module.to_owned(), 0),
    };
    Frame::from_read(name, filename, short, line)
}
