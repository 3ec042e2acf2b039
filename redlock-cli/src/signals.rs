//! The signals `redlock run` acts on and passes on to the command, and the
//! ones it leaves ignored.
//!
//! A signal that was ignored when `redlock` started stays ignored:
//! `nohup` ignores SIGHUP, and a shell without job control starts a
//! background command with SIGINT and SIGQUIT ignored. Registering a
//! handler (signal-hook's, like any other) would replace that disposition,
//! and since `exec` resets handled signals to their default action the
//! command would then see SIGHUP as deadly again. So such a signal gets no
//! handler: `redlock` ignores it, never passes it on, and the command
//! inherits it ignored.

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

/// The signals that end a wait for the lock and that are passed on to the
/// command's process group while it runs (unless ignored at start).
pub(crate) const PASSED_ON: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

/// The signals of [`PASSED_ON`] that were not ignored when `redlock`
/// started: the ones to handle. Must run before any handler is registered.
pub(crate) fn to_handle() -> Vec<i32> {
    let ignored = ignored_at_start();
    PASSED_ON
        .into_iter()
        .filter(|signal| !is_in(ignored, *signal))
        .collect()
}

/// Whether `signal` is in the mask `set` (bit `signal - 1`, as the kernel
/// numbers them).
fn is_in(set: u64, signal: i32) -> bool {
    u32::try_from(signal - 1)
        .ok()
        .and_then(|bit| 1u64.checked_shl(bit))
        .is_some_and(|bit| set & bit != 0)
}

/// The mask of signals this process ignores, from `SigIgn` in
/// `/proc/self/status` (Linux). Elsewhere, or when it cannot be read, none.
fn ignored_at_start() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| parse_sig_ign(&status))
        .unwrap_or(0)
}

/// The `SigIgn:` line of a `/proc/<pid>/status` text, as a mask.
fn parse_sig_ign(status: &str) -> Option<u64> {
    let hex = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))?
        .trim();
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ignored_mask_is_read_bit_by_signal() {
        let status = "Name:\tredlock\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000005\n";
        let mask = parse_sig_ign(status).unwrap_or_default();
        // Bit 0 is SIGHUP (1), bit 2 is SIGQUIT (3).
        assert!(is_in(mask, SIGHUP));
        assert!(!is_in(mask, SIGINT));
        assert!(is_in(mask, SIGQUIT));
        assert!(!is_in(mask, SIGTERM));
        assert!(!is_in(mask, 0));
        assert!(!is_in(mask, 99));
        assert_eq!(parse_sig_ign("Name:\tx\n"), None);
    }
}
