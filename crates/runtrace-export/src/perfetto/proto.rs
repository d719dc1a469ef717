//! The few Perfetto protobuf messages the exporter writes, declared by hand
//! for `prost` (no `protoc` at build time). Field numbers are those of
//! Perfetto's own protos (`protos/perfetto/trace/trace_packet.proto`,
//! `track_event/track_event.proto`, `track_event/track_descriptor.proto`,
//! `interned_data/interned_data.proto`, `track_event/debug_annotation.proto`,
//! `profiling/profile_common.proto`, `profiling/profile_packet.proto`);
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
    /// A callstack sample of one thread (CPU or off-CPU profile).
    #[prost(message, optional, tag = "66")]
    pub perf_sample: Option<PerfSample>,
}

/// `Profiling.CpuMode.MODE_USER`: the sample was taken in user space.
pub const MODE_USER: i32 = 2;

/// `PerfSample` (only the fields of a sample with a callstack). Trace
/// processor puts each in its `perf_sample` table, on thread `tid`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PerfSample {
    /// Process id.
    #[prost(uint32, optional, tag = "2")]
    pub pid: Option<u32>,
    /// Thread id.
    #[prost(uint32, optional, tag = "3")]
    pub tid: Option<u32>,
    /// The sampled stack ([`InternedData::callstacks`]).
    #[prost(uint64, optional, tag = "4")]
    pub callstack_iid: Option<u64>,
    /// [`MODE_USER`].
    #[prost(int32, optional, tag = "5")]
    pub cpu_mode: Option<i32>,
}

/// `InternedString` (function names, mapping paths, build ids).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    /// The id others refer to.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// The bytes.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub str: Option<Vec<u8>>,
}

/// `Mapping`: an executable mapping of the process.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    /// The id frames refer to.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Interned build id ([`InternedData::build_ids`]; 0: none).
    #[prost(uint64, optional, tag = "2")]
    pub build_id: Option<u64>,
    /// First address.
    #[prost(uint64, optional, tag = "4")]
    pub start: Option<u64>,
    /// One past the last address.
    #[prost(uint64, optional, tag = "5")]
    pub end: Option<u64>,
    /// File offset mapped at `start`.
    #[prost(uint64, optional, tag = "8")]
    pub exact_offset: Option<u64>,
    /// Path components ([`InternedData::mapping_paths`]).
    #[prost(uint64, repeated, packed = "false", tag = "7")]
    pub path_string_ids: Vec<u64>,
}

/// `Frame`: one function of a callstack.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Frame {
    /// The id callstacks refer to.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Interned name ([`InternedData::function_names`]).
    #[prost(uint64, optional, tag = "2")]
    pub function_name_id: Option<u64>,
    /// Its mapping ([`InternedData::mappings`]; 0: none).
    #[prost(uint64, optional, tag = "3")]
    pub mapping_id: Option<u64>,
    /// Address relative to the mapped file (address - start + offset).
    #[prost(uint64, optional, tag = "4")]
    pub rel_pc: Option<u64>,
}

/// `Callstack`: frames, root first.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Callstack {
    /// The id samples refer to.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// [`Frame::iid`]s, outermost (root) first.
    #[prost(uint64, repeated, packed = "false", tag = "2")]
    pub frame_ids: Vec<u64>,
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

/// `InternedData` (event and annotation names, callstacks).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    /// Event names by iid.
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedName>,
    /// Debug annotation names by iid.
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedName>,
    /// Function names of frames.
    #[prost(message, repeated, tag = "5")]
    pub function_names: Vec<InternedString>,
    /// Frames of callstacks.
    #[prost(message, repeated, tag = "6")]
    pub frames: Vec<Frame>,
    /// Callstacks of samples.
    #[prost(message, repeated, tag = "7")]
    pub callstacks: Vec<Callstack>,
    /// Build ids of mappings.
    #[prost(message, repeated, tag = "16")]
    pub build_ids: Vec<InternedString>,
    /// Path components of mappings.
    #[prost(message, repeated, tag = "17")]
    pub mapping_paths: Vec<InternedString>,
    /// Mappings of frames.
    #[prost(message, repeated, tag = "19")]
    pub mappings: Vec<Mapping>,
}

impl InternedData {
    /// Nothing to send.
    pub fn is_empty(&self) -> bool {
        self.event_names.is_empty()
            && self.debug_annotation_names.is_empty()
            && self.function_names.is_empty()
            && self.frames.is_empty()
            && self.callstacks.is_empty()
            && self.build_ids.is_empty()
            && self.mapping_paths.is_empty()
            && self.mappings.is_empty()
    }
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
