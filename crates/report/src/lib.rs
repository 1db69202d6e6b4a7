//! report: (being built)
