//! PLACEHOLDER until helper "sig"'s timer + SIGPROF sampler is merged
//! (branch w3-sig owns this file): the fallback always reports itself
//! unavailable, so a refused perf_event_open gives mode 0.

use super::RawSample;

pub(crate) struct SignalSampler;

impl SignalSampler {
    pub(crate) fn new(_hz: u32) -> Result<SignalSampler, String> {
        Err("not built in this version".into())
    }
    pub(crate) fn add_thread(&mut self, _tid: u64) -> Result<(), String> {
        Ok(())
    }
    pub(crate) fn remove_thread(&mut self, _tid: u64) {}
    pub(crate) fn drain(&mut self, _cutoff_ticks: u64, _out: &mut Vec<RawSample>) -> u64 {
        0
    }
}
