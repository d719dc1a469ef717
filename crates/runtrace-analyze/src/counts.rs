//! Events by kind: the pass every read runs beside its analyses, which
//! `runtrace summary` prints and the [registry](crate::registry) reads to
//! tell which analyses apply.

use runtrace_model::event::{kind, Ev};
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::profile::{Profile, SampleKind};

/// Events by kind (the pass of `runtrace summary`).
#[derive(Debug, Clone)]
pub struct Counts {
    /// Events of each kind, by kind.
    pub by_kind: [u64; 256],
}

impl Default for Counts {
    fn default() -> Self {
        Counts { by_kind: [0; 256] }
    }
}

impl Counts {
    /// Events of kind `k`.
    pub fn of(&self, k: u8) -> u64 {
        self.by_kind[k as usize]
    }

    /// Counts the samples of `profile` (one per `cpu_sample` or `off_cpu`
    /// event), for a read whose CPU samples went to the profile pass
    /// instead of this one.
    ///
    /// ```
    /// use runtrace_analyze::counts::Counts;
    /// use runtrace_model::profile::Profile;
    /// use runtrace_model::event::kind;
    /// let mut c = Counts::default();
    /// c.add_samples(&Profile::default());
    /// assert_eq!(c.of(kind::CPU_SAMPLE), 0);
    /// ```
    pub fn add_samples(&mut self, profile: &Profile) {
        for s in &profile.samples {
            let k = match s.kind {
                SampleKind::OnCpu => kind::CPU_SAMPLE,
                SampleKind::OffCpu { .. } => kind::OFF_CPU,
            };
            self.by_kind[k as usize] += 1;
        }
        self.by_kind[kind::ALLOC_SAMPLE as usize] += profile.allocs.len() as u64;
    }

    /// Events of all built-in kinds.
    pub fn total(&self) -> u64 {
        self.by_kind.iter().sum()
    }
}

impl Pass for Counts {
    #[inline]
    fn wants(&self) -> Wants {
        Wants::RUNTIME
            .or(Wants::APP)
            .or(Wants::PROFILE)
            .or(Wants::SPAN_EVENTS)
    }

    #[inline(always)]
    fn event(&mut self, ev: &Ev, _model: &Model) {
        self.by_kind[ev.kind as usize] += 1;
    }
}
