//! Analyses as passes: one read of a trace feeds every pass the events it
//! asked for, in timestamp order, with the [`Model`] filled so far.
//!
//! A pass says which event groups it reads ([`Wants`]), so the reader
//! decodes nothing no pass uses; two passes run in one read as the pair
//! `(a, b)` (statically dispatched, so a pair costs no virtual calls).
//!
//! ```
//! use runtrace_model::event::{kind, Ev};
//! use runtrace_model::model::Model;
//! use runtrace_model::pass::{Pass, Wants};
//! use runtrace_model::synth::TraceBuilder;
//!
//! /// Counts polls per thread.
//! #[derive(Default)]
//! struct Polls(Vec<u64>);
//!
//! impl Pass for Polls {
//!     fn wants(&self) -> Wants {
//!         Wants::RUNTIME
//!     }
//!     fn event(&mut self, ev: &Ev, _model: &Model) {
//!         if ev.kind == kind::POLL_START {
//!             let t = ev.thread as usize;
//!             if t >= self.0.len() {
//!                 self.0.resize(t + 1, 0);
//!             }
//!             self.0[t] += 1;
//!         }
//!     }
//! }
//!
//! let mut b = TraceBuilder::new();
//! b.poll_start(3, 0, 10, 1, 0, 0);
//! b.poll_end(3, 0, 20, 1, false);
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("trace.0.bin");
//! std::fs::write(&path, b.finish()).unwrap();
//! let mut polls = Polls::default();
//! let (model, stats) = runtrace_model::input::read(&[path], &mut polls, None);
//! assert_eq!(polls.0, [1]);
//! assert_eq!(model.threads[0].tid, 3);
//! assert_eq!(stats.events, 2);
//! ```

use crate::event::{kind, Ev};
use crate::model::Model;
use crate::records::{Life, Poll};
use runtrace_format::schema::Group;

/// The event groups a pass reads (the catalog's `group`s; no pass reads
/// the executor's own events yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wants {
    /// Runtime events (task, worker and queue events: `runtrace analyze`).
    pub runtime: bool,
    /// Application instrumentation (`runtrace backlog`).
    pub app: bool,
    /// CPU profile samples (`cpu_sample`, `off_cpu`: the CPU profile pass (`runtrace_model::profile`)).
    pub profile: bool,
    /// The task lifecycle's derived records ([`Pass::life`], see
    /// [`crate::lifecycle`]); implies `runtime`.
    pub lifecycle: bool,
    /// The application's spans (`span_new`, `span_enter`, ...); with
    /// `lifecycle`, their derived records too ([`crate::spans`]).
    pub span: bool,
}

impl Wants {
    /// Runtime events only.
    pub const RUNTIME: Wants = Wants {
        runtime: true,
        app: false,
        profile: false,
        lifecycle: false,
        span: false,
    };
    /// Application events only.
    pub const APP: Wants = Wants {
        runtime: false,
        app: true,
        profile: false,
        lifecycle: false,
        span: false,
    };
    /// CPU profile samples only.
    pub const PROFILE: Wants = Wants {
        runtime: false,
        app: false,
        profile: true,
        lifecycle: false,
        span: false,
    };
    /// The lifecycle's records, and the runtime events they come from.
    pub const LIFECYCLE: Wants = Wants {
        runtime: true,
        app: false,
        profile: false,
        lifecycle: true,
        span: false,
    };

    /// The spans' events only (counted, queried), without the records
    /// paired from them.
    pub const SPAN_EVENTS: Wants = Wants {
        runtime: false,
        app: false,
        profile: false,
        lifecycle: false,
        span: true,
    };
    /// The spans' events and derived records (the span, the poll it ran
    /// in: [`crate::spans`]), and the runtime events they are paired with.
    pub const SPANS: Wants = Wants {
        runtime: true,
        app: false,
        profile: false,
        lifecycle: true,
        span: true,
    };

    /// Either group.
    pub const fn or(self, o: Wants) -> Wants {
        Wants {
            runtime: self.runtime || o.runtime,
            app: self.app || o.app,
            profile: self.profile || o.profile,
            lifecycle: self.lifecycle || o.lifecycle,
            span: self.span || o.span,
        }
    }

    /// Whether an event of kind `k` is in these groups (its catalog group,
    /// one table load: this runs for every event).
    #[inline(always)]
    pub const fn has(self, k: u8) -> bool {
        match kind::group(k) {
            Some(Group::Runtime) => self.runtime,
            Some(Group::App) => self.app,
            Some(Group::Profile) => self.profile,
            Some(Group::Span) => self.span,
            Some(Group::Executor | Group::Recorder) | None => false,
        }
    }

    /// The event kinds in these groups as a bit set, for a check per
    /// event that is one load and a bit test (what [`Wants::has`] answers
    /// through the catalog's group table and a match).
    ///
    /// ```
    /// use runtrace_model::event::kind;
    /// use runtrace_model::pass::Wants;
    /// let k = Wants::LIFECYCLE.kinds();
    /// assert!(k.has(kind::POLL_START));
    /// assert!(!k.has(kind::IO));
    /// ```
    pub const fn kinds(self) -> Kinds {
        let mut bits = [0u64; 4];
        let mut k = 0usize;
        while k < 256 {
            if self.has(k as u8) {
                bits[k >> 6] |= 1 << (k & 63);
            }
            k += 1;
        }
        Kinds(bits)
    }
}

/// A set of event kinds ([`Wants::kinds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kinds([u64; 4]);

impl Kinds {
    /// The kinds the lifecycle layer pairs into records (tasks, polls and
    /// wakes): what [`Kinds::without_lifecycle`] takes out.
    pub const LIFECYCLE: [u8; 5] = [
        kind::SPAWN,
        kind::TERMINATE,
        kind::WAKE,
        kind::POLL_START,
        kind::POLL_END,
    ];

    /// Whether kind `k` is in the set.
    #[inline(always)]
    pub const fn has(&self, k: u8) -> bool {
        self.0[(k >> 6) as usize] >> (k & 63) & 1 != 0
    }

    /// The kinds in either set.
    ///
    /// ```
    /// use runtrace_model::event::kind;
    /// use runtrace_model::pass::Wants;
    /// let k = Wants::SPAN_EVENTS.kinds().or(Wants::LIFECYCLE.kinds());
    /// assert!(k.has(kind::POLL_START));
    /// ```
    pub const fn or(self, o: Kinds) -> Kinds {
        let mut bits = self.0;
        let mut i = 0;
        while i < bits.len() {
            bits[i] |= o.0[i];
            i += 1;
        }
        Kinds(bits)
    }

    /// These kinds without the [lifecycle's](Kinds::LIFECYCLE): for a pass
    /// that reads tasks, polls and wakes only as records
    /// ([`Pass::raw_kinds`]).
    ///
    /// ```
    /// use runtrace_model::event::kind;
    /// use runtrace_model::pass::Wants;
    /// let k = Wants::LIFECYCLE.kinds().without_lifecycle();
    /// assert!(!k.has(kind::POLL_START) && k.has(kind::PARK));
    /// ```
    pub const fn without_lifecycle(self) -> Kinds {
        let mut bits = self.0;
        let mut i = 0;
        while i < Kinds::LIFECYCLE.len() {
            let k = Kinds::LIFECYCLE[i];
            bits[(k >> 6) as usize] &= !(1 << (k & 63));
            i += 1;
        }
        Kinds(bits)
    }
}

/// One analysis over the events of a trace.
pub trait Pass {
    /// The event groups this pass reads (the reader decodes only those).
    fn wants(&self) -> Wants;

    /// One event, in timestamp order within a recording (a late one is
    /// still delivered; a pass may count those). Indexes in `ev` point into
    /// `model`.
    fn event(&mut self, ev: &Ev, model: &Model);

    /// Several events, in order: a run of one thread's that come before
    /// every other thread's next (the reader hands runs, so a pass that
    /// stores events can copy them together). The default takes them one
    /// by one ([`Pass::event`]).
    #[inline]
    fn events(&mut self, evs: &[Ev], model: &Model) {
        for ev in evs {
            self.event(ev, model);
        }
    }

    /// [`Pass::event`] for a pass run with its lifecycle
    /// ([`crate::lifecycle::Tracked`]), with the poll open on the event's
    /// thread (the innermost; None: none), for a pass that asks what an
    /// event happened in. The default forgets it.
    #[inline(always)]
    fn event_in(&mut self, ev: &Ev, _open: Option<&Poll>, model: &Model) {
        self.event(ev, model)
    }

    /// The kinds this pass takes as raw events ([`Pass::event_in`]) when
    /// it runs with its lifecycle ([`crate::lifecycle::Tracked`]): by
    /// default every kind it [wants](Pass::wants). A pass that reads
    /// tasks, polls and wakes only as [records](Pass::life) leaves their
    /// kinds out ([`Kinds::without_lifecycle`]): the tracker still pairs
    /// them, and the pass is not called for most events of a runtime
    /// trace. A pass inside a tuple may still get them (a sibling
    /// wanting them raw), so it must tolerate them.
    fn raw_kinds(&self) -> Kinds {
        self.wants().kinds()
    }

    /// A record of the task lifecycle ([`crate::lifecycle`]), for passes
    /// that [want](Wants::lifecycle) them; for one raw event, before
    /// [`Pass::event`].
    fn life(&mut self, _rec: &Life<'_>, _model: &Model) {}

    /// A recording's events are over (another follows, or the read ends).
    fn end_recording(&mut self, _model: &Model) {}

    /// The read is over: close what is still open.
    fn finish(&mut self, _model: &Model) {}
}

impl<A: Pass, B: Pass> Pass for (A, B) {
    #[inline]
    fn wants(&self) -> Wants {
        self.0.wants().or(self.1.wants())
    }

    fn raw_kinds(&self) -> Kinds {
        self.0.raw_kinds().or(self.1.raw_kinds())
    }

    #[inline(always)]
    fn event(&mut self, ev: &Ev, model: &Model) {
        if self.0.wants().has(ev.kind) {
            self.0.event(ev, model);
        }
        if self.1.wants().has(ev.kind) {
            self.1.event(ev, model);
        }
    }

    #[inline(always)]
    fn event_in(&mut self, ev: &Ev, open: Option<&Poll>, model: &Model) {
        if self.0.wants().has(ev.kind) {
            self.0.event_in(ev, open, model);
        }
        if self.1.wants().has(ev.kind) {
            self.1.event_in(ev, open, model);
        }
    }

    #[inline(always)]
    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        if self.0.wants().lifecycle {
            self.0.life(rec, model);
        }
        if self.1.wants().lifecycle {
            self.1.life(rec, model);
        }
    }

    fn end_recording(&mut self, model: &Model) {
        self.0.end_recording(model);
        self.1.end_recording(model);
    }

    fn finish(&mut self, model: &Model) {
        self.0.finish(model);
        self.1.finish(model);
    }
}

impl<P: Pass + ?Sized> Pass for &mut P {
    #[inline]
    fn wants(&self) -> Wants {
        (**self).wants()
    }

    fn raw_kinds(&self) -> Kinds {
        (**self).raw_kinds()
    }

    #[inline(always)]
    fn event(&mut self, ev: &Ev, model: &Model) {
        (**self).event(ev, model)
    }

    #[inline(always)]
    fn event_in(&mut self, ev: &Ev, open: Option<&Poll>, model: &Model) {
        (**self).event_in(ev, open, model)
    }

    #[inline(always)]
    fn life(&mut self, rec: &Life<'_>, model: &Model) {
        (**self).life(rec, model)
    }

    fn end_recording(&mut self, model: &Model) {
        (**self).end_recording(model)
    }

    fn finish(&mut self, model: &Model) {
        (**self).finish(model)
    }
}
