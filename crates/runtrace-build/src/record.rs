//! The recorder backend: built-in events call the recorder's generated
//! per-event functions; application events register their schema on first
//! use and encode their fields inline through the recorder's generic
//! `emit`.
//!
//! ```
//! let cat = runtrace_build::Catalog::parse(
//!     "provider = \"myapp\"\n[[event]]\nname = \"done\"\ndoc = \"\"\nfields = []\n",
//! )
//! .unwrap();
//! let fire = runtrace_build::record::rust_fire(&cat, &cat.events[0]);
//! assert!(fire.contains("__rt::UserEventDef::new(\"myapp\", \"done\""));
//! ```

use crate::catalog::{Catalog, Event};
use crate::fields::field_variant;
use crate::symbols::RUNTRACE_PROVIDER;

/// The statements recording one event (when a recording is on).
pub fn rust_fire(cat: &Catalog, ev: &Event) -> String {
    let names: Vec<&str> = ev.fields.iter().map(|f| f.name.as_str()).collect();
    if cat.provider == RUNTRACE_PROVIDER {
        let args = names.join(", ");
        let name = &ev.name;
        return format!(
            "        match ticks {{\n            \
             Some(t) => __rt::recorder::events::at::{name}(t, {args}),\n            \
             None => __rt::recorder::events::{name}({args}),\n        }}\n"
        );
    }
    // Application events: registered on first use, encoded inline.
    let fields: Vec<String> = ev
        .fields
        .iter()
        .map(|f| format!("({:?}, __rt::FieldType::{})", f.name, field_variant(&f.ty)))
        .collect();
    let max: Vec<&str> = ev
        .fields
        .iter()
        .map(|f| match f.ty.as_str() {
            "bool" => "1",
            "f64" => "8",
            "str" => "257",
            _ => "10",
        })
        .collect();
    let enc: String = ev
        .fields
        .iter()
        .map(|f| {
            let n = &f.name;
            let e = match f.ty.as_str() {
                "bool" => format!("{{ buf[pos] = {n} as u8; pos + 1 }}"),
                "f64" => {
                    format!("{{ buf[pos..pos + 8].copy_from_slice(&{n}.to_le_bytes()); pos + 8 }}")
                }
                "str" => format!("__rt::recorder::encode_str(buf, pos, {n})"),
                "i64" | "i32" => {
                    format!("__rt::varint::write(buf, pos, __rt::varint::zigzag({n} as i64))")
                }
                "istr" | "loc" => format!("__rt::varint::write(buf, pos, {n}.id() as u64)"),
                _ => format!("__rt::varint::write(buf, pos, {n} as u64)"),
            };
            format!("                let pos = {e};\n")
        })
        .collect();
    format!(
        "        if __rt::recorder::is_recording() {{\n            \
         static DEF: __rt::UserEventDef = __rt::UserEventDef::new({prov:?}, {name:?}, &[{fields}]);\n            \
         let enc = |buf: &mut [u8], pos: usize, _reg: &mut u64| {{\n\
         {enc}                pos\n            }};\n            \
         match ticks {{\n                \
         Some(t) => __rt::recorder::emit_at(t, DEF.id(), 0 {max}, None, enc),\n                \
         None => __rt::recorder::emit(DEF.id(), 0 {max}, None, enc),\n            }}\n        }}\n",
        prov = cat.provider,
        name = ev.name,
        fields = fields.join(", "),
        max = max.iter().map(|m| format!("+ {m}")).collect::<Vec<_>>().join(" "),
    )
}
