//! A process that returns from `main` while holding a guard leaves no key:
//! dropping the manager's last handle waits for the releases it queued.

use std::process::Command;
use std::time::Duration;

use redlock_tests::harness::wait_until;

use crate::redis_common::{cluster, exists, key};

#[test]
fn bug_returning_from_main_with_a_guard_left_the_lock_held() {
    let servers = cluster(5);
    let key = key("exit-child");
    for run in 0..2 {
        // The second run would be refused (Contended) if the first left the
        // key on a majority.
        let output = Command::new(env!("CARGO_BIN_EXE_redlock-exit-child"))
            .arg(&key)
            .args(servers.urls())
            .output()
            .expect("the child runs");
        assert!(
            output.status.success(),
            "run {run}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The child waited (at most twice its node timeout) for its queued
        // releases; one sent but answered late still runs on its master just
        // after the exit: wait for it. 10 s is well below the child's 30 s
        // TTL, so a release never sent still leaves the key and fails.
        for server in servers.iter() {
            wait_until(Duration::from_secs(10), "no key left", || {
                !exists(server, &key)
            })
            .unwrap_or_else(|e| panic!("run {run}: key left on {}: {e}", server.url()));
        }
    }
}
