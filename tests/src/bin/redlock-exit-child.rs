//! A process that takes a lock and returns from `main` holding its guard,
//! as a user's program would; `redis_exit.rs` runs it against real servers
//! to check that nothing is left behind.
//!
//! Usage: `redlock-exit-child KEY URL...`

use std::time::Duration;

use redlock_redis::Redlock;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let key = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: KEY URL..."))?;
    let urls: Vec<String> = args.collect();
    let locks = Redlock::connect(&urls)?;
    let _lock = locks.try_lock(key.as_str(), Duration::from_secs(30))?;
    Ok(())
}
