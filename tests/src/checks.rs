//! Checks shared by the tests of several backends.

use std::sync::Mutex;
use std::time::Duration;

use redlock_core::backend::LockBackend;
use redlock_core::{FencingToken, Redlock};

/// `threads` threads take the lock on `key` `each` times in turn (with
/// fencing on); the tokens, in the order the holders got them, must rise
/// strictly. Panics otherwise.
pub fn tokens_rise_across_holders<B: LockBackend + 'static>(
    locks: &Redlock<B>,
    key: &str,
    threads: usize,
    each: usize,
) {
    // Pushed while holding the lock: the order of the vector is the order
    // of the holders.
    let seen: Mutex<Vec<FencingToken>> = Mutex::new(Vec::with_capacity(threads * each));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..each {
                    let lock = locks
                        .lock_timeout(key, Duration::from_secs(10), Duration::from_secs(60))
                        .expect("acquire");
                    let token = lock.fencing_token().expect("fencing is on");
                    seen.lock().expect("no poison").push(token);
                    lock.release().expect("held");
                }
            });
        }
    });
    let seen = seen.into_inner().expect("no poison");
    assert_eq!(seen.len(), threads * each);
    for pair in seen.windows(2) {
        assert!(
            pair[1].value() > pair[0].value(),
            "token {} after {}",
            pair[1],
            pair[0]
        );
    }
}
