//! Takes and releases a lock on the Redis masters given as arguments.
//!
//! ```text
//! cargo run -p redlock-redis --example redis_quickstart -- redis://127.0.0.1:6379 redis://127.0.0.1:6380 redis://127.0.0.1:6381
//! ```
//!
//! Without arguments it prints its usage to stderr and exits with 64
//! (`EX_USAGE`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Duration;

use redlock_redis::Redlock;

/// `EX_USAGE` from `sysexits.h`: the command was used incorrectly.
const EX_USAGE: u8 = 64;

const USAGE: &str = "\
usage: redis_quickstart URL...
Takes and releases a lock on the Redis masters at the given URLs, e.g.
  cargo run -p redlock-redis --example redis_quickstart -- \\
    redis://127.0.0.1:6379 redis://127.0.0.1:6380 redis://127.0.0.1:6381";

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        eprintln!("{USAGE}");
        return Ok(ExitCode::from(EX_USAGE));
    }
    let locks = Redlock::builder([])
        .node_timeout(Duration::from_millis(50))
        .acquire_timeout(Duration::from_secs(2))
        .connect(&urls)?;
    let mut lock = locks.lock("redlock-redis:quickstart", Duration::from_secs(10))?;
    println!(
        "locked on {} node(s), valid for {:?}",
        locks.nodes().count(),
        lock.validity()
    );
    let validity = lock.extend(Duration::from_secs(10))?;
    println!("extended, valid for {validity:?}");
    lock.release()?;
    println!("released");
    Ok(ExitCode::SUCCESS)
}
