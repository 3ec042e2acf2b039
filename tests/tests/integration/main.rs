//! The workspace's integration tests, built as one binary.

mod bad_input;
mod manager;
