//! The container limits a worker ran under: a CPU quota and a memory
//! limit, as a run's records keep them, and how a user writes them
//! (`--cpus 0.5`, `--memory 512M`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A CPU quota and a memory limit for each worker, as a container runtime
/// sets them (`docker run --cpus 0.5 --memory 512m`, a pod's
/// `resources.limits`). Both absent: no limits, the bare machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// CPUs' worth of time per period (0.5: half of one CPU); the CFS
    /// quota is this many periods of 100 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// The memory limit in bytes (the cgroup's `memory.max`, swap off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// A limit that cannot be used, with what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError(String);

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LimitError {}

/// The smallest quota the kernel takes is 1 ms per 100 ms period.
pub const MIN_CPUS: f64 = 0.01;

/// The smallest memory limit that can start an interpreter at all.
pub const MIN_MEMORY_BYTES: u64 = 4 << 20;

impl Limits {
    /// Whether any limit is set.
    pub fn is_set(&self) -> bool {
        self.cpus.is_some() || self.memory_bytes.is_some()
    }

    /// Reads a CPU quota as `--cpus` takes it: a positive number of CPUs
    /// (`0.5`, `2`), at least [`MIN_CPUS`].
    pub fn parse_cpus(text: &str) -> Result<f64, LimitError> {
        match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= MIN_CPUS => Ok(v),
            _ => Err(LimitError(format!(
                "`{text}` is not a CPU quota: write a number of CPUs of at least {MIN_CPUS}, such as 0.5 or 2"
            ))),
        }
    }

    /// Reads a memory size as `--memory` takes it: bytes, or a number with
    /// a binary suffix `K`, `M`, `G` (also `KiB`, `MB`, ... all read as
    /// powers of 1024, as docker and Kubernetes' `Mi`/`Gi` mean them), at
    /// least [`MIN_MEMORY_BYTES`].
    pub fn parse_memory(text: &str) -> Result<u64, LimitError> {
        let bad = || {
            LimitError(format!(
                "`{text}` is not a memory size: write bytes or a number with K, M or G (such as 512M or 1.5G), at least 4M"
            ))
        };
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "ki" | "kib" => 1 << 10,
            "m" | "mb" | "mi" | "mib" => 1 << 20,
            "g" | "gb" | "gi" | "gib" => 1 << 30,
            "t" | "tb" | "ti" | "tib" => 1 << 40,
            _ => return Err(bad()),
        };
        let value: f64 = num.parse().map_err(|_| bad())?;
        let bytes = value * scale as f64;
        if !bytes.is_finite() || bytes < MIN_MEMORY_BYTES as f64 || bytes > u64::MAX as f64 {
            return Err(bad());
        }
        Ok(bytes as u64)
    }
}

/// A size in binary units, shortest exact first (`512 MiB`, `1.5 GiB`).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, size) in UNITS {
        if bytes >= size {
            let v = bytes as f64 / size as f64;
            return if (v - v.round()).abs() < 1e-9 {
                format!("{v:.0} {name}")
            } else {
                format!("{v:.1} {name}")
            };
        }
    }
    format!("{bytes} B")
}

impl fmt::Display for Limits {
    /// `cpus 0.5, memory 512 MiB`, or `no limits`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(c) = self.cpus {
            parts.push(format!("cpus {c}"));
        }
        if let Some(m) = self.memory_bytes {
            parts.push(format!("memory {}", format_bytes(m)));
        }
        if parts.is_empty() {
            f.write_str("no limits")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_docker_writes_them() {
        for (text, bytes) in [
            ("512M", 512 << 20),
            ("1G", 1 << 30),
            ("1.5g", 3 << 29),
            ("64Mi", 64 << 20),
            ("256 MiB", 256 << 20),
            ("8388608", 8 << 20),
            ("4096k", 4 << 20),
        ] {
            assert_eq!(Limits::parse_memory(text), Ok(bytes), "{text}");
        }
        for bad in ["", "G", "1X", "-1G", "1M", "nanG", "1..2G"] {
            let err = Limits::parse_memory(bad).unwrap_err().to_string();
            assert!(err.contains("512M"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_cpu_quota_is_a_positive_number_of_cpus() {
        assert_eq!(Limits::parse_cpus("0.5"), Ok(0.5));
        assert_eq!(Limits::parse_cpus(" 2 "), Ok(2.0));
        for bad in ["0", "-1", "0.001", "inf", "half"] {
            assert!(Limits::parse_cpus(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_read_and_round_trip() {
        let l = Limits {
            cpus: Some(0.5),
            memory_bytes: Some(3 << 29),
        };
        assert_eq!(l.to_string(), "cpus 0.5, memory 1.5 GiB");
        assert_eq!(Limits::default().to_string(), "no limits");
        let json = serde_json::to_string(&l).unwrap();
        assert_eq!(json, r#"{"cpus":0.5,"memory_bytes":1610612736}"#);
        assert_eq!(serde_json::from_str::<Limits>(&json).unwrap(), l);
        assert_eq!(
            serde_json::from_str::<Limits>("{}").unwrap(),
            Limits::default()
        );
        assert_eq!(format_bytes(1000), "1000 B");
        assert_eq!(format_bytes(64 << 20), "64 MiB");
    }
}
