//! The packet stream: length-delimited `TracePacket`s (field 1 of `Trace`)
//! on one writer sequence, with interned names (incremental state). Reuses
//! one encode buffer, so a packet costs no allocation.
//!
//! ```
//! use runtrace_export::perfetto::writer::PacketWriter;
//! use runtrace_export::perfetto::proto::{TrackEvent, TYPE_INSTANT};
//! let mut w = PacketWriter::new(Vec::new());
//! let iid = w.event_name(0, 7, || "spawn".into());
//! w.event(10, TrackEvent { r#type: Some(TYPE_INSTANT), name_iid: Some(iid), ..Default::default() });
//! let (bytes, err) = w.finish();
//! assert!(err.is_none() && bytes[0] == 0x0a);
//! ```

use super::proto::{
    InternedData, InternedName, PerfSample, TracePacket, TrackDescriptor, TrackEvent,
    SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE,
};
use prost::Message;
use std::io::{self, Write};

/// Our writer sequence id (any non-zero number; one sequence).
const SEQUENCE: u32 = 1;

/// Writes packets to `W`, interning event names per (space, index).
pub struct PacketWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    /// iid by space then dense index (0: not interned yet).
    iids: Vec<Vec<u64>>,
    next_iid: u64,
    /// Names interned since the last packet, sent with the next one.
    pending: InternedData,
    first: bool,
    err: Option<io::Error>,
    /// Packets written.
    pub packets: u64,
}

impl<W: Write> PacketWriter<W> {
    /// A writer on `out` (wrap files in a `BufWriter`).
    pub fn new(out: W) -> Self {
        PacketWriter {
            out,
            buf: Vec::with_capacity(256),
            iids: Vec::new(),
            next_iid: 1,
            pending: InternedData::default(),
            first: true,
            err: None,
            packets: 0,
        }
    }

    /// The iid of event name `index` of `space` (a caller's numbering,
    /// dense from 0), interning `name()` on first use.
    #[inline]
    pub fn event_name(&mut self, space: usize, index: u32, name: impl FnOnce() -> String) -> u64 {
        if space >= self.iids.len() {
            self.iids.resize_with(space + 1, Vec::new);
        }
        let v = &mut self.iids[space];
        let i = index as usize;
        if i >= v.len() {
            v.resize(i + 1, 0);
        }
        if v[i] == 0 {
            v[i] = self.next_iid;
            self.next_iid += 1;
            self.pending.event_names.push(InternedName {
                iid: Some(v[i]),
                name: Some(name()),
            });
        }
        v[i]
    }

    /// Interns debug annotation names (iid = position + 1); sent with the
    /// next packet.
    pub fn annotation_names(&mut self, names: &[&str]) {
        for (i, n) in names.iter().enumerate() {
            self.pending.debug_annotation_names.push(InternedName {
                iid: Some(i as u64 + 1),
                name: Some((*n).to_string()),
            });
        }
    }

    /// Interned data to send with the next packet (each kind of interned
    /// message numbers its own iids; the caller keeps them).
    pub fn interned(&mut self) -> &mut InternedData {
        &mut self.pending
    }

    /// Writes a callstack sample at `ts` (ns); its callstack must have
    /// been interned ([`PacketWriter::interned`]) before.
    pub fn sample(&mut self, ts: u64, s: PerfSample) {
        self.write(TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(SEQUENCE),
            perf_sample: Some(s),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            ..Default::default()
        });
    }

    /// Writes a track descriptor.
    pub fn track(&mut self, d: TrackDescriptor) {
        self.write(TracePacket {
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_descriptor: Some(d),
            ..Default::default()
        });
    }

    /// Writes a track event at `ts` (ns) and returns it, so the caller can
    /// reuse its vectors' capacity.
    #[inline]
    pub fn event(&mut self, ts: u64, e: TrackEvent) -> TrackEvent {
        let p = self.write(TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(SEQUENCE),
            track_event: Some(e),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            ..Default::default()
        });
        p.track_event.unwrap_or_default()
    }

    #[inline]
    fn write(&mut self, mut p: TracePacket) -> TracePacket {
        if self.first {
            // The first packet starts the sequence's incremental state.
            self.first = false;
            p.sequence_flags = Some(p.sequence_flags.unwrap_or(0) | SEQ_INCREMENTAL_STATE_CLEARED);
        }
        let interned = !self.pending.is_empty();
        if interned {
            p.interned_data = Some(std::mem::take(&mut self.pending));
            p.sequence_flags = Some(p.sequence_flags.unwrap_or(0) | SEQ_NEEDS_INCREMENTAL_STATE);
        }
        if self.err.is_none() {
            // The body first, then its length: one pass over the message
            // instead of measuring it, then encoding it.
            self.buf.clear();
            p.encode_raw(&mut self.buf);
            // `Trace.packet` is field 1, length-delimited.
            let mut head = [0x0a; 11];
            let mut n = 1;
            let mut len = self.buf.len() as u64;
            while len >= 0x80 {
                head[n] = len as u8 | 0x80;
                len >>= 7;
                n += 1;
            }
            head[n] = len as u8;
            if let Err(e) = self
                .out
                .write_all(&head[..=n])
                .and_then(|_| self.out.write_all(&self.buf))
            {
                self.err = Some(e);
            }
            self.packets += 1;
        }
        if interned {
            p.interned_data = None;
        }
        p
    }

    /// Flushes and returns the output and the first write error, if any.
    pub fn finish(mut self) -> (W, Option<io::Error>) {
        if self.err.is_none() {
            if let Err(e) = self.out.flush() {
                self.err = Some(e);
            }
        }
        (self.out, self.err)
    }
}
