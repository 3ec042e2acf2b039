//! Runs a cell's clients (threads, or tasks on a tokio runtime) through one
//! window while the calling thread coordinates.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use crate::measure::{self, Hooks, Plan, Progress, Recorder, Usage, Window};

/// How long, after the `after` hook, tasks may take to finish before they
/// are abandoned.
const JOIN_TIMEOUT: Duration = Duration::from_secs(15);

/// What a cell needs to run: timing, the servers to account, hooks.
#[derive(Debug)]
pub(crate) struct Setup<'a> {
    pub(crate) plan: Plan,
    /// redis-server pids whose CPU time counts as server CPU.
    pub(crate) servers: Vec<u32>,
    pub(crate) hooks: Hooks<'a>,
}

/// Runs `body(client, window, recorder)` on `clients` threads; each loops
/// over cycles until the window closes.
pub(crate) fn threads<F>(
    setup: &Setup<'_>,
    clients: usize,
    body: F,
) -> anyhow::Result<(Recorder, Usage)>
where
    F: Fn(usize, &Window, &mut Recorder) + Sync,
{
    let progress = Arc::new(Progress::default());
    let window = measure::window(&setup.plan);
    std::thread::scope(|scope| {
        let spawned: Result<Vec<_>, _> = (0..clients)
            .map(|client| {
                let progress = &progress;
                let body = &body;
                std::thread::Builder::new()
                    .name(format!("bench-client-{client}"))
                    .spawn_scoped(scope, move || {
                        let mut recorder = Recorder::new();
                        {
                            let _done = progress.done_guard();
                            body(client, &window, &mut recorder);
                        }
                        // Alive until the window's end is accounted.
                        progress.hold();
                        recorder
                    })
            })
            .collect();
        let handles = match spawned {
            Ok(handles) => handles,
            Err(e) => {
                // The threads already started must not wait for a window
                // end that nobody will account.
                progress.release();
                return Err(anyhow::Error::new(e).context("spawning client threads"));
            }
        };
        let usage = measure::coordinate(
            &setup.plan,
            &window,
            &setup.servers,
            &progress,
            clients,
            &setup.hooks,
        );
        let mut total = Recorder::new();
        for handle in handles {
            match handle.join() {
                Ok(recorder) => total.merge(recorder),
                Err(_) => total.fault("a client thread panicked"),
            }
        }
        Ok((total, usage?))
    })
}

/// Runs the futures `client(i, window)` as `clients` tasks on a new tokio
/// multi-thread runtime (default worker count); each loops over cycles until
/// the window closes and returns its recorder.
pub(crate) fn tasks<F, Fut>(
    setup: &Setup<'_>,
    clients: usize,
    client: F,
) -> anyhow::Result<(Recorder, Usage)>
where
    F: Fn(usize, Window) -> Fut,
    Fut: Future<Output = Recorder> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let progress = Arc::new(Progress::default());
    let window = measure::window(&setup.plan);
    // The runtime's worker threads outlive the tasks: no need to hold them.
    let handles: Vec<_> = (0..clients)
        .map(|i| {
            let done = progress.done_guard();
            let task = client(i, window);
            runtime.spawn(async move {
                let _done = done;
                task.await
            })
        })
        .collect();
    let usage = measure::coordinate(
        &setup.plan,
        &window,
        &setup.servers,
        &progress,
        clients,
        &setup.hooks,
    );
    let total = runtime.block_on(async {
        let mut total = Recorder::new();
        for handle in handles {
            match tokio::time::timeout(JOIN_TIMEOUT, handle).await {
                Ok(Ok(recorder)) => total.merge(recorder),
                Ok(Err(_)) => total.fault("a client task panicked"),
                Err(_) => total.fault("a client task never finished"),
            }
        }
        total
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok((total, usage?))
}
