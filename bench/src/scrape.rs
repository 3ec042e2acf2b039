//! The metrics recorder of the `ours-metrics` cell: an in-process registry
//! of atomic counters, gauges and histogram sample buckets (`metrics-util`'s
//! `Registry` with `AtomicStorage`, which the Prometheus exporter's recorder
//! is built on), scraped once a second by another thread as an exporter
//! would be.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_util::registry::{AtomicStorage, Registry};

/// A registry shared by the recorder and its scraper.
#[derive(Clone)]
pub(crate) struct Scraped(Arc<Registry<Key, AtomicStorage>>);

impl Scraped {
    pub(crate) fn new() -> Self {
        Scraped(Arc::new(Registry::atomic()))
    }

    /// What an exporter's scrape does to the registry: reads every counter
    /// and gauge, and drains every histogram's samples (here only summed).
    /// Returns how many samples it drained.
    pub(crate) fn scrape(&self) -> u64 {
        self.0.visit_counters(|_, c| {
            std::hint::black_box(c.load(Ordering::Relaxed));
        });
        self.0.visit_gauges(|_, g| {
            std::hint::black_box(g.load(Ordering::Relaxed));
        });
        let mut samples = 0_u64;
        let mut sum = 0.0_f64;
        self.0.visit_histograms(|_, h| {
            h.clear_with(|xs| {
                samples += xs.len() as u64;
                sum += xs.iter().sum::<f64>();
            });
        });
        std::hint::black_box(sum);
        samples
    }
}

impl std::fmt::Debug for Scraped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scraped").finish_non_exhaustive()
    }
}

impl Recorder for Scraped {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        self.0
            .get_or_create_counter(key, |c| Counter::from_arc(Arc::clone(c)))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        self.0
            .get_or_create_gauge(key, |g| Gauge::from_arc(Arc::clone(g)))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        self.0
            .get_or_create_histogram(key, |h| Histogram::from_arc(Arc::clone(h)))
    }
}
