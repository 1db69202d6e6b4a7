//! spawn: (being built)
