"""The service's inference worker. Start-up imports only the standard
library and the light protocol code; the model package is imported by the
`load` operation, never at start-up (what `cargo xtask check`
checks)."""
