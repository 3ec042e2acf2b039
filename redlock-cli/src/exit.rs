//! Exit codes (documented in `redlock --help` and docs/cli.md).

/// Bad arguments (sysexits' `EX_USAGE`).
pub(crate) const USAGE: u8 = 64;
/// No quorum: the servers could not be reached (`EX_UNAVAILABLE`).
pub(crate) const UNAVAILABLE: u8 = 69;
/// An unexpected error (`EX_SOFTWARE`).
pub(crate) const SOFTWARE: u8 = 70;
/// `completions`, `man`: the output could not be written (`EX_IOERR`).
pub(crate) const IO_ERROR: u8 = 74;
/// The lock is held by someone else (`EX_TEMPFAIL`, as flock's `-E`).
pub(crate) const CONFLICT: u8 = 75;
/// The lock was lost while the command ran; the command was stopped.
pub(crate) const LOST: u8 = 79;
/// `check`: the deployment is not fit for Redlock.
pub(crate) const UNFIT: u8 = 1;
/// The command could not be started.
pub(crate) const CANNOT_RUN: u8 = 126;
/// The command was not found.
pub(crate) const NOT_FOUND: u8 = 127;

/// The conventional code of a process ended by signal `signal`.
pub(crate) fn of_signal(signal: i32) -> u8 {
    u8::try_from(128 + signal.clamp(0, 127)).unwrap_or(u8::MAX)
}

/// A failure that ends `redlock` with `code` after printing `message`.
#[derive(Debug)]
pub(crate) struct Exit {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Exit {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Exit {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Exit::new(USAGE, message)
    }
}
