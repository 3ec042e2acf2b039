//! Takes and releases a lock on the Redis masters given as arguments.
//!
//! ```text
//! cargo run -p redlock-redis --example redis_quickstart -- redis://127.0.0.1:6379 redis://127.0.0.1:6380 redis://127.0.0.1:6381
//! ```
#![allow(clippy::print_stdout)]

use std::time::Duration;

use redlock_redis::Redlock;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let urls: Vec<String> = std::env::args().skip(1).collect();
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
    Ok(())
}
