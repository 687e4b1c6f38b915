//! The `loops` binary. STUB.
fn main() {}
