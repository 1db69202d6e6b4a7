//! The bench's answer beyond its summary (`summary.json`, built in
//! `phases::summary`): the rule that turns how a run ended into its exit
//! code.

/// How a bench run ended, as its exit code reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchEnd {
    /// A summary file could not be written (the results printed are whole).
    pub files_missing: bool,
    /// The number of the signal that cut the run short (SIGINT for a
    /// Ctrl-C), if one did.
    pub interrupted_by: Option<i32>,
    /// A trial, the serve phase or the memory view failed.
    pub failed: bool,
}

/// The exit code of a bench run, first rule that holds: 2 when a file is
/// missing (the run's record is not whole), 128 + the signal's number when
/// it was cut short, 1 when anything failed, 0 otherwise.
pub fn exit_code(end: &BenchEnd) -> u8 {
    if end.files_missing {
        2
    } else if let Some(n) = end.interrupted_by {
        (128 + n).clamp(0, 255) as u8
    } else if end.failed {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_outranks_an_interrupt_which_outranks_a_failure() {
        let end = |files_missing, interrupted_by, failed| BenchEnd {
            files_missing,
            interrupted_by,
            failed,
        };
        assert_eq!(exit_code(&end(false, None, false)), 0);
        assert_eq!(exit_code(&end(false, None, true)), 1);
        assert_eq!(exit_code(&end(false, Some(2), true)), 130);
        assert_eq!(exit_code(&end(false, Some(15), false)), 143);
        assert_eq!(exit_code(&end(true, Some(2), true)), 2);
    }
}
