//! The field types of the catalog, in one table ([`TYPES`]): for each type
//! its wire encoding and type code, and how every generated language sees
//! it (the Rust argument type, the value passed in a register, the C and
//! FFI types of LTTng's tracepoints). The backends read it through
//! [`crate::fields`], and runtrace-format's build script generates from it
//! `FieldType` (codes, longest encodings, wire encodings) and the per-type
//! macro the recorder encodes with, so adding a field type is one row here
//! (plus its decoders, which the compiler points at).
//!
//! ```
//! use runtrace_build::types::{ty, Wire};
//! let t = ty("istr").unwrap();
//! assert_eq!((t.variant, t.code, t.wire), ("Istr", 6, Wire::Varint));
//! assert_eq!(t.wire.max_len(), 10);
//! ```

/// A wire encoding of field values (docs/format.md section 6). Each has
/// one encoding function in `runtrace_format::schema::wire`
/// ([`Wire::function`]) that the recorder, the application probes and the
/// test-trace builder all write through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// An unsigned LEB128 varint.
    Varint,
    /// A signed integer as a zigzag varint.
    Zigzag,
    /// One byte, 0 or 1.
    Bool,
    /// 8 bytes, IEEE 754 binary64 little endian.
    F64,
    /// Varint length and UTF-8 bytes, at most 255 of them (longer text is
    /// cut at a character boundary).
    Str,
    /// A task id as the zigzag varint of its difference from the chunk's
    /// task register, which it then sets.
    Task,
    /// No bytes: the value is the chunk's worker register.
    Register,
}

impl Wire {
    /// Every wire encoding.
    pub const ALL: [Wire; 7] = [
        Wire::Varint,
        Wire::Zigzag,
        Wire::Bool,
        Wire::F64,
        Wire::Str,
        Wire::Task,
        Wire::Register,
    ];

    /// Most bytes one value takes (`Str`: a 2-byte varint length and 255
    /// bytes, runtrace-format's `MAX_INLINE_STR`).
    ///
    /// ```
    /// assert_eq!(runtrace_build::types::Wire::Str.max_len(), 257);
    /// ```
    pub fn max_len(self) -> usize {
        match self {
            Wire::Varint | Wire::Zigzag | Wire::Task => 10,
            Wire::Bool => 1,
            Wire::F64 => 8,
            Wire::Str => 2 + 255,
            Wire::Register => 0,
        }
    }

    /// The encoding function in `runtrace_format::schema::wire` (none for
    /// `Register`, which writes nothing). `Task` takes the task register
    /// as well as the value.
    pub fn function(self) -> Option<&'static str> {
        Some(match self {
            Wire::Varint => "put_varint",
            Wire::Zigzag => "put_zigzag",
            Wire::Bool => "put_bool",
            Wire::F64 => "put_f64",
            Wire::Str => "put_str",
            Wire::Task => "put_task",
            Wire::Register => return None,
        })
    }

    /// One line on what the encoding writes.
    pub fn doc(self) -> &'static str {
        match self {
            Wire::Varint => "An unsigned LEB128 varint.",
            Wire::Zigzag => "A signed integer as a zigzag varint.",
            Wire::Bool => "One byte, 0 or 1.",
            Wire::F64 => "8 bytes, IEEE 754 binary64 little endian.",
            Wire::Str => "Varint length and UTF-8 bytes (at most 255; longer text is cut at a character boundary).",
            Wire::Task => "A task id as the zigzag varint of its difference from the chunk's task register, which it then sets.",
            Wire::Register => "No bytes: the value is the chunk's worker register.",
        }
    }
}

/// Everything the generators know about one field type. In the code
/// templates, `{v}` stands for the field's value (a variable of the
/// field's name) and `{rt}` for the path of a module that has `Istr` and
/// `Loc` (runtrace-core's interned names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldTypeInfo {
    /// The catalog's name (`type = "u64"`).
    pub name: &'static str,
    /// The `runtrace_format::schema::FieldType` variant.
    pub variant: &'static str,
    /// The wire type code (docs/format.md section 5; widths share one).
    pub code: u8,
    /// How values are written.
    pub wire: Wire,
    /// Only built-in events may have it (the registers belong to the
    /// recorder's chunks).
    pub builtin_only: bool,
    /// The Rust type of an argument.
    pub rust: &'static str,
    /// The argument as the input of its wire encoding function (`u64`,
    /// `i64`, `bool`, `f64`, `&str`; the task id for `Task`).
    pub to_wire: &'static str,
    /// The argument as a 64-bit register value (USDT, perf-probe):
    /// integers widened, floats as their bits, text as a pointer to a
    /// NUL-terminated copy (`__c_{v}` for `str`, see [`crate::fields::c_strings`]).
    pub reg: &'static str,
    /// The C type of an LTTng tracepoint argument.
    pub c: &'static str,
    /// The Rust type of the same argument across the FFI.
    pub ffi: &'static str,
    /// The argument as passed across the FFI.
    pub ffi_value: &'static str,
    /// One line for the catalog's reader.
    pub doc: &'static str,
}

/// Every field type of the catalog, in the order of `probes/events.toml`'s
/// header (the first type of each wire code is the one a decoded schema
/// reports).
pub const TYPES: &[FieldTypeInfo] = &[
    FieldTypeInfo {
        name: "u64",
        variant: "U64",
        code: 1,
        wire: Wire::Varint,
        builtin_only: false,
        rust: "u64",
        to_wire: "{v}",
        reg: "{v} as u64",
        c: "uint64_t",
        ffi: "u64",
        ffi_value: "{v}",
        doc: "Unsigned 64-bit integer (varint).",
    },
    FieldTypeInfo {
        name: "u32",
        variant: "U32",
        code: 1,
        wire: Wire::Varint,
        builtin_only: false,
        rust: "u32",
        to_wire: "{v} as u64",
        reg: "{v} as u64",
        c: "uint32_t",
        ffi: "u32",
        ffi_value: "{v}",
        doc: "Unsigned 32-bit integer (varint).",
    },
    FieldTypeInfo {
        name: "u16",
        variant: "U16",
        code: 1,
        wire: Wire::Varint,
        builtin_only: false,
        rust: "u16",
        to_wire: "{v} as u64",
        reg: "{v} as u64",
        c: "uint16_t",
        ffi: "u16",
        ffi_value: "{v}",
        doc: "Unsigned 16-bit integer (varint).",
    },
    FieldTypeInfo {
        name: "u8",
        variant: "U8",
        code: 1,
        wire: Wire::Varint,
        builtin_only: false,
        rust: "u8",
        to_wire: "{v} as u64",
        reg: "{v} as u64",
        c: "uint8_t",
        ffi: "u8",
        ffi_value: "{v}",
        doc: "Unsigned 8-bit integer (varint).",
    },
    FieldTypeInfo {
        name: "i64",
        variant: "I64",
        code: 2,
        wire: Wire::Zigzag,
        builtin_only: false,
        rust: "i64",
        to_wire: "{v}",
        reg: "{v} as u64",
        c: "int64_t",
        ffi: "i64",
        ffi_value: "{v}",
        doc: "Signed 64-bit integer (zigzag varint).",
    },
    FieldTypeInfo {
        name: "i32",
        variant: "I32",
        code: 2,
        wire: Wire::Zigzag,
        builtin_only: false,
        rust: "i32",
        to_wire: "{v} as i64",
        reg: "{v} as i64 as u64",
        c: "int32_t",
        ffi: "i32",
        ffi_value: "{v}",
        doc: "Signed 32-bit integer (zigzag varint).",
    },
    FieldTypeInfo {
        name: "bool",
        variant: "Bool",
        code: 3,
        wire: Wire::Bool,
        builtin_only: false,
        rust: "bool",
        to_wire: "{v}",
        reg: "{v} as u64",
        c: "uint8_t",
        ffi: "u8",
        ffi_value: "{v} as u8",
        doc: "Boolean (one byte).",
    },
    FieldTypeInfo {
        name: "f64",
        variant: "F64",
        code: 4,
        wire: Wire::F64,
        builtin_only: false,
        rust: "f64",
        to_wire: "{v}",
        reg: "{v}.to_bits()",
        c: "double",
        ffi: "f64",
        ffi_value: "{v}",
        doc: "64-bit float (8 bytes LE).",
    },
    FieldTypeInfo {
        name: "str",
        variant: "Str",
        code: 5,
        wire: Wire::Str,
        builtin_only: false,
        rust: "&str",
        to_wire: "{v}",
        reg: "__c_{v}.as_ptr() as u64",
        c: "const char *",
        ffi: "*const ::core::ffi::c_char",
        ffi_value: "__c_{v}.as_ptr()",
        doc: "Short inline string (at most 255 bytes).",
    },
    FieldTypeInfo {
        name: "istr",
        variant: "Istr",
        code: 6,
        wire: Wire::Varint,
        builtin_only: false,
        rust: "{rt}::Istr",
        to_wire: "{v}.id() as u64",
        reg: "{v}.c_str().as_ptr() as u64",
        c: "const char *",
        ffi: "*const ::core::ffi::c_char",
        ffi_value: "{v}.c_str().as_ptr()",
        doc: "Interned string (its id; the text is in a STRINGS frame).",
    },
    FieldTypeInfo {
        name: "loc",
        variant: "Loc",
        code: 7,
        wire: Wire::Varint,
        builtin_only: false,
        rust: "{rt}::Loc",
        to_wire: "{v}.id() as u64",
        reg: "{v}.c_str().as_ptr() as u64",
        c: "const char *",
        ffi: "*const ::core::ffi::c_char",
        ffi_value: "{v}.c_str().as_ptr()",
        doc: "Interned spawn location (its id; the text is in a LOCATIONS frame).",
    },
    FieldTypeInfo {
        name: "task",
        variant: "Task",
        code: 8,
        wire: Wire::Task,
        builtin_only: true,
        rust: "u64",
        to_wire: "{v}",
        reg: "{v} as u64",
        c: "uint64_t",
        ffi: "u64",
        ffi_value: "{v}",
        doc: "Task id, delta-encoded against the chunk's task register.",
    },
    FieldTypeInfo {
        name: "worker",
        variant: "Worker",
        code: 9,
        wire: Wire::Register,
        builtin_only: true,
        rust: "u32",
        to_wire: "{v}",
        reg: "{v} as u64",
        c: "uint32_t",
        ffi: "u32",
        ffi_value: "{v}",
        doc: "Worker index, taken from the chunk's worker register (no bytes).",
    },
];

/// The table row of catalog type `name`, if it is one.
pub fn ty(name: &str) -> Option<&'static FieldTypeInfo> {
    TYPES.iter().find(|t| t.name == name)
}

/// `template` with `{v}` replaced by `value` and `{rt}` by `rt`.
///
/// ```
/// let t = runtrace_build::types::ty("istr").unwrap();
/// assert_eq!(runtrace_build::types::fill(t.to_wire, "q", "__rt"), "q.id() as u64");
/// assert_eq!(runtrace_build::types::fill(t.rust, "q", "__rt"), "__rt::Istr");
/// ```
pub fn fill(template: &str, value: &str, rt: &str) -> String {
    template.replace("{v}", value).replace("{rt}", rt)
}
