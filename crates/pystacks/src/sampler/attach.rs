use std::time::Instant;

use timeline::monotonic_ns;

use crate::error::Error;
use crate::native::NativeReader;
use crate::procfs;
use crate::spy::Spy;
use crate::stack::sanitize;

use super::RETRY_ATTACH;
use super::run::{Reader, Run, State, Tracked};

impl Run {
    /// Starts tracking `pid` if it is new.
    pub(super) fn track(&mut self, pid: u32, parent: Option<u32>) {
        if self.tracked.contains_key(&pid) {
            return;
        }
        self.order.push(pid);
        self.tracked.insert(
            pid,
            Tracked {
                parent,
                command: procfs::cmdline(pid),
                state: State::Pending {
                    since: Instant::now(),
                    last: None,
                    tried: None,
                },
                cpu_at_read: None,
                seen_ns: monotonic_ns(),
                gone_ns: None,
            },
        );
    }

    /// Tries to attach every pending process; gives up on those that
    /// stayed unreadable past the attach timeout or that the kernel
    /// refuses.
    pub(super) fn attach_pending(&mut self) {
        let pending: Vec<u32> = self
            .order
            .iter()
            .copied()
            .filter(|pid| match self.tracked[pid].state {
                State::Pending { tried, .. } => tried.is_none_or(|t| t.elapsed() >= RETRY_ATTACH),
                _ => false,
            })
            .collect();
        for pid in pending {
            let mut tried = None;
            let gone = procfs::is_gone(pid);
            let python_mapped = procfs::maps_mention_python(pid);
            let outcome = if gone {
                Err(Error::ProcessGone { pid })
            } else if python_mapped == Some(false)
                && pid == self.root
                && self.options.native
                && procfs::parent_of(pid) != Some(std::process::id())
            {
                // The service above the workers: its native stacks (not
                // of this process's own child, a launcher whose Python
                // child is what is wanted; see `NativeOfChild`).
                let t0 = Instant::now();
                tried = Some(t0);
                let r = NativeReader::attach(pid).and_then(|mut native| {
                    native.read(false)?;
                    Ok(Reader::Native(Box::new(native)))
                });
                self.attach_ns += t0.elapsed().as_nanos() as u64;
                self.root_native = r.is_ok();
                r
            } else if python_mapped == Some(false) {
                // Not (yet) an interpreter: a launcher, or a fork about to
                // exec Python. Cheap to look again next round.
                Err(Error::NotPython {
                    pid,
                    command: procfs::cmdline(pid),
                    searched_children: false,
                    detail: String::new(),
                })
            } else {
                let t0 = Instant::now();
                tried = Some(t0);
                let r = Spy::attach(
                    pid,
                    self.options.lines,
                    self.options.pause,
                    self.options.native,
                )
                .map(|spy| Reader::Python(Box::new(spy)));
                self.attach_ns += t0.elapsed().as_nanos() as u64;
                r
            };
            let labels = self.labels_for(pid);
            let t = self.tracked.get_mut(&pid).expect("tracked");
            match outcome {
                Ok(reader) => {
                    t.command = procfs::cmdline(pid);
                    let (version, exe) = match &reader {
                        Reader::Python(spy) => (Some(spy.version()), spy.exe()),
                        Reader::Native(_) => (
                            None,
                            std::fs::read_link(format!("/proc/{pid}/exe"))
                                .map(|p| p.to_string_lossy().into_owned())
                                .unwrap_or_default(),
                        ),
                    };
                    t.state = State::Attached {
                        version,
                        exe,
                        reader,
                        labels,
                        last_read: None,
                    };
                }
                Err(e) => {
                    let State::Pending {
                        since,
                        tried: tried_before,
                        ..
                    } = t.state
                    else {
                        unreachable!("only pending processes are attached")
                    };
                    let fatal = matches!(e, Error::ProcessGone { .. } | Error::PermissionDenied(_));
                    if matches!(e, Error::ProcessGone { .. }) {
                        t.gone_ns = Some(monotonic_ns());
                    } else {
                        // First read when the process was found, it may be
                        // its parent's (a fork that has not exec'd yet) or
                        // none (mid-exec, before the kernel sets the new
                        // one): the latest command line is the one kept.
                        let now = procfs::cmdline(pid);
                        if !now.is_empty() {
                            t.command = now;
                        }
                    }
                    let why = e.to_string();
                    if pid == self.root {
                        self.root_error = Some(e);
                    }
                    t.state = if fatal || since.elapsed() >= self.options.attach_timeout {
                        State::Done {
                            version: None,
                            native: false,
                            why: Some(why),
                        }
                    } else {
                        State::Pending {
                            since,
                            last: Some(why),
                            tried: tried.or(tried_before),
                        }
                    };
                }
            }
        }
    }

    /// Whether [`Sampler::start`] can return: `Ok` once a process is
    /// attached, `Err` when none can be any more, `None` meanwhile.
    pub(super) fn attachment(&mut self) -> Option<Result<(), Error>> {
        let states = || self.tracked.values().map(|t| &t.state);
        if states().any(|s| matches!(s, State::Attached { .. })) {
            return Some(Ok(()));
        }
        let root_refused = matches!(self.root_error, Some(Error::PermissionDenied(_)));
        let none_pending = !states().any(|s| matches!(s, State::Pending { .. }));
        let root_gone = procfs::is_gone(self.root);
        let can_still_appear = self.options.subprocesses && !root_gone;
        let timed_out = self.started.elapsed() >= self.options.attach_timeout;
        if !(root_refused || timed_out || (none_pending && !can_still_appear)) {
            return None;
        }
        Some(Err(self.attach_failure()))
    }

    /// Why no process could be attached: the asked-for process's last
    /// error, or that it is gone or not Python.
    pub(super) fn attach_failure(&mut self) -> Error {
        let searched_children = self.options.subprocesses;
        let root_gone = procfs::is_gone(self.root);
        match self.root_error.take() {
            Some(Error::NotPython {
                pid,
                command,
                detail,
                ..
            }) => Error::NotPython {
                pid,
                command,
                searched_children,
                detail,
            },
            Some(e) => e,
            None if root_gone => Error::ProcessGone { pid: self.root },
            None => Error::NotPython {
                pid: self.root,
                command: procfs::cmdline(self.root),
                searched_children,
                detail: String::new(),
            },
        }
    }

    /// The `process PID:"command"` labels from the asked-for process down
    /// to `pid` (none unless subprocesses are followed).
    pub(super) fn labels_for(&self, pid: u32) -> Vec<String> {
        if !self.options.subprocesses {
            return Vec::new();
        }
        let mut chain = vec![(pid, procfs::cmdline(pid))];
        let mut at = pid;
        while let Some(parent) = self.tracked.get(&at).and_then(|t| t.parent) {
            if parent == self.root && self.root_native {
                // The native parent is a root of its own beside them.
                break;
            }
            let command = self
                .tracked
                .get(&parent)
                .map(|t| t.command.clone())
                .unwrap_or_default();
            chain.push((parent, command));
            at = parent;
        }
        chain
            .into_iter()
            .rev()
            .map(|(pid, command)| sanitize(&format!("process {pid}:\"{command}\"")))
            .collect()
    }
}
