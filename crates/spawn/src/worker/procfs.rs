//! What the lifecycle reads in `/proc`: the worker's resident set size.

/// `VmRSS` of `/proc/PID/status` in bytes; `None` where absent.
pub(super) fn vm_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut words = line["VmRSS:".len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(n * 1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_parsed_in_bytes() {
        let status = "Name:\tpython3\nVmPeak:\t  20000 kB\nVmRSS:\t   12345 kB\nThreads:\t1\n";
        assert_eq!(parse_vm_rss(status), Some(12345 * 1024));
    }

    #[test]
    fn vm_rss_absent_is_none() {
        // A zombie's status has no VmRSS line.
        assert_eq!(parse_vm_rss("Name:\tx\nState:\tZ (zombie)\n"), None);
        assert_eq!(parse_vm_rss("VmRSS:\tlots\n"), None);
    }

    #[test]
    fn own_rss_is_read() {
        assert!(vm_rss_bytes(std::process::id()).unwrap() > 0);
    }
}
