//! The stdio transport's way in: the worker's stdin pipe, non-blocking,
//! each line's write bounded in time with poll(2). (Its way out, stdout
//! cut into stamped frames, is the reader thread of `readers`.)

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::process::ChildStdin;
use std::time::{Duration, Instant};

/// Puts the worker's stdin pipe in non-blocking mode, so a write can be
/// bounded in time.
pub(crate) fn set_nonblocking(stdin: &ChildStdin) -> io::Result<()> {
    let fd = stdin.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own; F_GETFL/F_SETFL touch only its flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes the whole line to the non-blocking stdin, waiting with poll(2)
/// while the pipe is full; `TimedOut` when it stays full past `timeout`.
pub(crate) fn write_line(
    stdin: &mut ChildStdin,
    mut line: &[u8],
    timeout: Duration,
) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    while !line.is_empty() {
        match stdin.write(line) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => line = &line[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                let mut pfd = libc::pollfd {
                    fd: stdin.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
                // SAFETY: one valid pollfd for a descriptor we own.
                let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
                if rc < 0 {
                    let err = io::Error::last_os_error();
                    if err.kind() != io::ErrorKind::Interrupted {
                        return Err(err);
                    }
                }
                // rc == 0 loops back to the deadline check; POLLERR or
                // POLLHUP makes the next write fail with EPIPE.
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
