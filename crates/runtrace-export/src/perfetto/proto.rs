//! The few Perfetto protobuf messages the exporter writes, declared by hand
//! for `prost` (no `protoc` at build time). Field numbers are those of
//! Perfetto's own protos (`protos/perfetto/trace/trace_packet.proto`,
//! `track_event/track_event.proto`, `track_event/track_descriptor.proto`,
//! `interned_data/interned_data.proto`, `track_event/debug_annotation.proto`);
//! the tests decode the output with the `perfetto` Python package's
//! generated classes, which would reject a wrong type or number.
//!
//! ```
//! use prost::Message;
//! use runtrace_export::perfetto::proto::{TracePacket, TrackEvent, TYPE_INSTANT};
//! let p = TracePacket {
//!     timestamp: Some(5),
//!     track_event: Some(TrackEvent { r#type: Some(TYPE_INSTANT), ..Default::default() }),
//!     ..Default::default()
//! };
//! let bytes = p.encode_to_vec();
//! assert_eq!(TracePacket::decode(&bytes[..]).unwrap(), p);
//! ```

/// `TrackEvent.Type.TYPE_SLICE_BEGIN`.
pub const TYPE_SLICE_BEGIN: i32 = 1;
/// `TrackEvent.Type.TYPE_SLICE_END`.
pub const TYPE_SLICE_END: i32 = 2;
/// `TrackEvent.Type.TYPE_INSTANT`.
pub const TYPE_INSTANT: i32 = 3;
/// `TrackEvent.Type.TYPE_COUNTER`.
pub const TYPE_COUNTER: i32 = 4;
/// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE`.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `TracePacket`: one element of `Trace.packet` (field 1 of the file).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    /// Nanoseconds (the boot clock by default; we write wall-clock ns).
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// The writer sequence this packet belongs to (interning is per sequence).
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// A slice, instant or counter value.
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// Names this packet introduces (incremental state).
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// [`SEQ_INCREMENTAL_STATE_CLEARED`] / [`SEQ_NEEDS_INCREMENTAL_STATE`].
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// A track (process, thread, counter or async lane).
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

/// `TrackEvent`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    /// Arguments shown in the UI's details panel.
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// One of the `TYPE_*` constants.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    /// Interned name ([`InternedData::event_names`]).
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    /// The track it belongs to ([`TrackDescriptor::uuid`]).
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// A counter's value.
    #[prost(int64, optional, tag = "30")]
    pub counter_value: Option<i64>,
    /// Flows that start (or pass) here.
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    /// Flows that end here.
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `DebugAnnotation` (only the kinds we write).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    /// Interned name ([`InternedData::debug_annotation_names`]).
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    /// A boolean value.
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    /// An unsigned value.
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    /// A signed value.
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    /// A string value.
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
}

/// `InternedData` (event and annotation names).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    /// Event names by iid.
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedName>,
    /// Debug annotation names by iid.
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedName>,
}

/// `EventName` and `DebugAnnotationName` (same shape: iid 1, name 2).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedName {
    /// The id events refer to.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// The text.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

/// `TrackDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    /// Unique id events refer to.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// Shown in the UI.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// Set on a process track.
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// Set on a thread track.
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// The track it nests under.
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    /// Set on a counter track.
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
}

/// `ProcessDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    /// Process id.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Process name.
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `ThreadDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    /// Process id.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Thread id.
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    /// Thread name.
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `CounterDescriptor` (no fields needed: plain values).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CounterDescriptor {}
