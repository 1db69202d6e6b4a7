//! The tcp transport's way in: where a ready line says to connect (a
//! loopback address only), the connection made within a timeout, and each
//! request line written to it bounded in time. (The ready line itself is
//! picked out of stderr by the stderr drain, and the replies are cut from
//! a clone of the connection by a reader thread, as stdout is on stdio.)

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use worker_proto::Ready;

/// The connection to a worker. Dropping it shuts the connection down both
/// ways: the worker reads EOF, and the harness's reader thread (on a clone
/// of the same socket) returns.
#[derive(Debug)]
pub(crate) struct TcpLink {
    stream: TcpStream,
}

/// Where a tcp ready line says to connect: its `host` (an IP address or
/// `localhost`; 127.0.0.1 when absent) and its `port`. Only a loopback
/// address is accepted: the worker is a child of this process, on this
/// machine.
pub(crate) fn address(ready: &Ready) -> Result<SocketAddr, String> {
    let port = match ready.extra.get("port") {
        Some(v) => v
            .as_u64()
            .filter(|p| (1..=u64::from(u16::MAX)).contains(p))
            .ok_or_else(|| format!("its `port` is {v}, not a port number from 1 to 65535"))?
            as u16,
        None => return Err("it names no `port`".to_owned()),
    };
    let ip = match ready.extra.get("host") {
        None => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Some(v) => match v.as_str() {
            Some("localhost") => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Some(text) => text
                .parse::<IpAddr>()
                .map_err(|_| format!("its `host` {v} is not an IP address"))?,
            None => return Err(format!("its `host` is {v}, not a string")),
        },
    };
    if !ip.is_loopback() {
        return Err(format!(
            "its `host` {ip} is not a loopback address (coldstart connects only to 127.0.0.0/8 or ::1)"
        ));
    }
    Ok(SocketAddr::new(ip, port))
}

impl TcpLink {
    /// Connects within `timeout`; returns the link and a clone of the
    /// stream for the reader thread.
    pub(crate) fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<(TcpLink, TcpStream)> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        // One request line is one segment: no Nagle delay on it.
        stream.set_nodelay(true)?;
        let reader = stream.try_clone()?;
        Ok((TcpLink { stream }, reader))
    }

    /// Writes the whole line within `timeout` (`TimedOut` otherwise); a
    /// connection the worker closed or reset is `BrokenPipe`.
    pub(crate) fn write_line(&mut self, line: &[u8], timeout: Duration) -> io::Result<()> {
        self.stream
            .set_write_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        match self.stream.write_all(line) {
            Ok(()) => Ok(()),
            Err(e) => Err(match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    io::ErrorKind::TimedOut.into()
                }
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::NotConnected => io::Error::new(io::ErrorKind::BrokenPipe, e),
                _ => e,
            }),
        }
    }
}

impl Drop for TcpLink {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ready(extra: serde_json::Value) -> Ready {
        let mut v = json!({"ready": true, "transport": "tcp"});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_address_is_the_loopback_host_and_port_the_line_names() {
        let a = address(&ready(json!({"host": "127.0.0.1", "port": 4000}))).unwrap();
        assert_eq!(a, "127.0.0.1:4000".parse().unwrap());
        let a = address(&ready(json!({"port": 4001}))).unwrap();
        assert_eq!(a, "127.0.0.1:4001".parse().unwrap());
        let a = address(&ready(json!({"host": "::1", "port": 4002}))).unwrap();
        assert_eq!(a, "[::1]:4002".parse().unwrap());
        let a = address(&ready(json!({"host": "localhost", "port": 4003}))).unwrap();
        assert_eq!(a, "127.0.0.1:4003".parse().unwrap());
    }

    #[test]
    fn a_line_without_a_usable_loopback_address_says_why() {
        let e = address(&ready(json!({"host": "127.0.0.1"}))).unwrap_err();
        assert!(e.contains("no `port`"), "{e}");
        let e = address(&ready(json!({"port": 0}))).unwrap_err();
        assert!(e.contains("not a port number"), "{e}");
        let e = address(&ready(json!({"port": "80"}))).unwrap_err();
        assert!(e.contains("not a port number"), "{e}");
        let e = address(&ready(json!({"host": "10.0.0.1", "port": 80}))).unwrap_err();
        assert!(e.contains("not a loopback address"), "{e}");
        let e = address(&ready(json!({"host": "example.com", "port": 80}))).unwrap_err();
        assert!(e.contains("not an IP address"), "{e}");
    }
}
