//! SQLite persistence for loops. STUB.
