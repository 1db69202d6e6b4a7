//! importguard: (being built)
